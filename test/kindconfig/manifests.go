// Package kindconfig reads the manifests of kind-config/ the way
// hack/kind-e2e.sh uses them: ${NAME} placeholders filled in, then applied
// server-side. Its tests check them against kind's types and a real
// kube-apiserver.
package kindconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

var placeholder = regexp.MustCompile(`\$\{([A-Z][A-Z0-9_]*)\}`)

// Objects reads the manifest at path with every ${NAME} replaced by
// values[NAME], as the script's sed does; an unknown placeholder is an
// error, not an empty string.
func Objects(path string, values map[string]string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var unknown []string
	filled := placeholder.ReplaceAllStringFunc(string(data), func(m string) string {
		v, ok := values[placeholder.FindStringSubmatch(m)[1]]
		if !ok {
			unknown = append(unknown, m)
		}
		return v
	})
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%s: unknown placeholders %v", path, unknown)
	}
	objs, err := decode(strings.NewReader(filled))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// decode reads a stream of YAML or JSON documents into objects, empty
// documents skipped. Each goes through JSON into unstructured, as the
// apiserver reads them: integers stay integers (a YAML document decoded
// into a map straight would make them floats).
func decode(r io.Reader) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	decoder := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for {
		var raw json.RawMessage
		if err := decoder.Decode(&raw); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if raw = bytes.TrimSpace(raw); len(raw) == 0 || string(raw) == "null" || string(raw) == "{}" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(raw); err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
}

// Apply applies obj server-side (kubectl apply --server-side
// --force-conflicts), or only dry-runs it.
func Apply(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		ri = dyn.Resource(mapping.Resource).Namespace(ns)
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: "kind-e2e", Force: &force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts)
	return err
}
