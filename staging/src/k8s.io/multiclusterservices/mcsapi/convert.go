// Package mcsapi holds helpers over the sigs.k8s.io/mcs-api types.
package mcsapi

import (
	"encoding/json"
	"fmt"

	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// ServiceImportFromV1Alpha1 converts a v1alpha1 ServiceImport to v1beta1.
// mcs-api serves both versions with the same schema and no conversion
// webhook, so the JSON of one is the JSON of the other.
func ServiceImportFromV1Alpha1(in *mcsv1alpha1.ServiceImport) (*mcsv1beta1.ServiceImport, error) {
	data, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	out := &mcsv1beta1.ServiceImport{}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("converting ServiceImport %s/%s to v1beta1: %w", in.Namespace, in.Name, err)
	}
	out.APIVersion = mcsv1beta1.GroupVersion.String()
	return out, nil
}
