package crdgate

import (
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// Discover returns the first of the wanted versions (preferred first) in
// which the server serves resource gr, as its discovery lists them, or ""
// when it serves none of them. Discovery is what any client may read: a
// caller allowed to read the resource only (not its CRD) learns the
// version this way. A group version the server does not know is not an
// error; a server that cannot be asked is.
func Discover(client discovery.DiscoveryInterface, gr schema.GroupResource, wanted []string) (string, error) {
	for _, v := range wanted {
		list, err := client.ServerResourcesForGroupVersion(schema.GroupVersion{Group: gr.Group, Version: v}.String())
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("discovering %s/%s: %w", gr.Group, v, err)
		}
		if slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == gr.Resource }) {
			return v, nil
		}
	}
	return "", nil
}

// Resource returns r in the first of the wanted versions the server
// serves (Discover), or r as it is when it serves none of them: reading
// it then says that the resource is missing.
func Resource(client discovery.DiscoveryInterface, r schema.GroupVersionResource, wanted []string) (schema.GroupVersionResource, error) {
	v, err := Discover(client, r.GroupResource(), wanted)
	if err != nil || v == "" {
		return r, err
	}
	r.Version = v
	return r, nil
}
