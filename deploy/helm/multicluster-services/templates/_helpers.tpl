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
