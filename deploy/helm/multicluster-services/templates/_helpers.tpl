{{/*
embed renders the objects of one of deploy/'s files (files/ links to
deploy/), so that the chart installs exactly what the kustomize packages
do: each object as the file writes it (parsed only to be chosen, never
written again, so that no YAML round trip changes a string). skip lists
kinds left out (the mcs-system Namespace, which
templates/namespace.yaml writes once), drop the objects left out, as
KIND/NAME.
*/}}
{{- define "mcs.embed" -}}
{{- $skip := .skip | default list -}}
{{- $drop := .drop | default list -}}
{{- range $doc := regexSplit "(?m)^---\\s*$" (.root.Files.Get .file) -1 }}
{{- $obj := fromYaml $doc }}
{{- if and $obj $obj.kind (not (has $obj.kind $skip)) (not (has (printf "%s/%s" $obj.kind $obj.metadata.name) $drop)) }}
---
{{ trim $doc }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
embedDeployments renders the objects of one of deploy/'s files as embed
does, but each Deployment's first container gets image and extraArgs
appended to its flags, its Secret volumes are renamed as secrets says
(old name: new name), and, with digest, its pods carry a digest of it,
so that a new kubeconfig rolls them out.
*/}}
{{- define "mcs.embedDeployments" -}}
{{- $root := .root -}}
{{- $image := .image -}}
{{- $extraArgs := .extraArgs | default list -}}
{{- $secrets := .secrets | default dict -}}
{{- $digest := .digest -}}
{{- range $doc := regexSplit "(?m)^---\\s*$" ($root.Files.Get .file) -1 }}
{{- $obj := fromYaml $doc }}
{{- if and $obj $obj.kind }}
{{- if eq $obj.kind "Deployment" }}
{{- $c := index $obj.spec.template.spec.containers 0 }}
{{- $_ := set $c "args" (concat $c.args $extraArgs) }}
{{- $_ := set $c "image" $image }}
{{- range $obj.spec.template.spec.volumes }}
{{- if .secret }}{{- if hasKey $secrets .secret.secretName }}{{- $_ := set .secret "secretName" (get $secrets .secret.secretName) }}{{- end }}{{- end }}
{{- end }}
{{- if $digest }}
{{- $_ := set $obj.spec.template.metadata "annotations" (merge (default dict $obj.spec.template.metadata.annotations) (dict "multiclusterservices.k8s.io/kubeconfig-sha256" (sha256sum $digest))) }}
{{- end }}
---
{{ toYaml $obj }}
{{- else }}
---
{{ trim $doc }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}
