package fakekubelet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/podimage"
)

// volumeDir is where the files of the pod's volumes are written.
func (k *Kubelet) volumeDir(pod *v1.Pod) string {
	return filepath.Join(k.cfg.StateDir, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), "volumes")
}

// prepareVolumes writes the pod's volumes that the fake kubelet serves and
// returns their directories by volume name: emptyDir, ConfigMap, Secret,
// and projected volumes of service account tokens (a TokenRequest bound to
// the pod), ConfigMaps, Secrets and the downward API: what the
// ServiceAccount admission plugin gives every pod, so that a client in a
// pod finds its credentials where in-cluster clients look. A missing
// object fails the preparation (the pod waits, as a kubelet's does); other
// volume types are left out.
func (k *Kubelet) prepareVolumes(ctx context.Context, pod *v1.Pod) (map[string]string, error) {
	dirs := map[string]string{}
	for _, vol := range pod.Spec.Volumes {
		dir := filepath.Join(k.volumeDir(pod), vol.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		var err error
		switch {
		case vol.EmptyDir != nil:
		case vol.ConfigMap != nil:
			err = k.writeConfigMap(ctx, dir, pod.Namespace, vol.ConfigMap.Name, vol.ConfigMap.Items, vol.ConfigMap.Optional)
		case vol.Secret != nil:
			err = k.writeSecret(ctx, dir, pod.Namespace, vol.Secret.SecretName, vol.Secret.Items, vol.Secret.Optional)
		case vol.Projected != nil:
			for _, src := range vol.Projected.Sources {
				if err = k.writeProjection(ctx, dir, pod, src); err != nil {
					break
				}
			}
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", vol.Name, err)
		}
		dirs[vol.Name] = dir
	}
	return dirs, nil
}

func (k *Kubelet) writeProjection(ctx context.Context, dir string, pod *v1.Pod, src v1.VolumeProjection) error {
	switch {
	case src.ServiceAccountToken != nil:
		sat := src.ServiceAccountToken
		req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: sat.ExpirationSeconds,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		}}
		if sat.Audience != "" {
			req.Spec.Audiences = []string{sat.Audience}
		}
		sa := pod.Spec.ServiceAccountName
		if sa == "" {
			sa = "default"
		}
		token, err := k.cfg.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("token of service account %s: %w", sa, err)
		}
		return writeFile(dir, sat.Path, []byte(token.Status.Token), 0o600)
	case src.ConfigMap != nil:
		return k.writeConfigMap(ctx, dir, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional)
	case src.Secret != nil:
		return k.writeSecret(ctx, dir, pod.Namespace, src.Secret.Name, src.Secret.Items, src.Secret.Optional)
	case src.DownwardAPI != nil:
		for _, item := range src.DownwardAPI.Items {
			if item.FieldRef == nil {
				continue
			}
			value, ok := podField(pod, item.FieldRef.FieldPath)
			if !ok {
				return fmt.Errorf("downward API field %s is not served", item.FieldRef.FieldPath)
			}
			if err := writeFile(dir, item.Path, []byte(value), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

func (k *Kubelet) writeConfigMap(ctx context.Context, dir, ns, name string, items []v1.KeyToPath, optional *bool) error {
	cm, err := k.cfg.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ConfigMap %s: %w", name, err)
	}
	data := map[string][]byte{}
	for key, value := range cm.Data {
		data[key] = []byte(value)
	}
	for key, value := range cm.BinaryData {
		data[key] = value
	}
	return writeKeys(dir, data, items)
}

func (k *Kubelet) writeSecret(ctx context.Context, dir, ns, name string, items []v1.KeyToPath, optional *bool) error {
	secret, err := k.cfg.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil
	}
	if err != nil {
		return fmt.Errorf("Secret %s: %w", name, err)
	}
	return writeKeys(dir, secret.Data, items)
}

// writeKeys writes the listed keys to their paths, or every key to a file
// of its name.
func writeKeys(dir string, data map[string][]byte, items []v1.KeyToPath) error {
	if len(items) == 0 {
		for key := range data {
			items = append(items, v1.KeyToPath{Key: key, Path: key})
		}
	}
	for _, item := range items {
		value, ok := data[item.Key]
		if !ok {
			return fmt.Errorf("no key %q", item.Key)
		}
		if err := writeFile(dir, item.Path, value, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(dir, path string, data []byte, mode os.FileMode) error {
	if path == "" || filepath.IsAbs(path) || strings.HasPrefix(filepath.Clean(path), "..") {
		return fmt.Errorf("invalid path %q", path)
	}
	target := filepath.Join(dir, path)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	return os.WriteFile(target, data, mode)
}

// podField is a downward API field of the pod.
func podField(pod *v1.Pod, path string) (string, bool) {
	switch path {
	case "metadata.namespace":
		return pod.Namespace, true
	case "metadata.name":
		return pod.Name, true
	case "metadata.uid":
		return string(pod.UID), true
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, true
	case "spec.nodeName":
		return pod.Spec.NodeName, true
	}
	return "", false
}

// mounts are the container's volume mounts of prepared volumes.
func mounts(c v1.Container, dirs map[string]string) []podimage.Mount {
	var out []podimage.Mount
	for _, m := range c.VolumeMounts {
		dir, ok := dirs[m.Name]
		if !ok {
			continue
		}
		out = append(out, podimage.Mount{Source: filepath.Join(dir, m.SubPath), Target: m.MountPath, ReadOnly: m.ReadOnly})
	}
	return out
}
