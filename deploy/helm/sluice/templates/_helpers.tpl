{{/* The chart's name. */}}
{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The objects' base name: the release name, with the chart's name when the
release's does not contain it. Trimmed to leave room for "-gossip".
*/}}
{{- define "sluice.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 56 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "sluice.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 56 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 56 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The labels that select the release's pods. */}}
{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The labels of every object. */}}
{{- define "sluice.labels" -}}
{{ include "sluice.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
The store's memory cap (--store-max-bytes): store.maxBytes, or
store.memoryPercent of resources.limits.memory rounded down to a MiB. The
limit must then be a whole number with an optional unit (Ki Mi Gi Ti, or
K M G T).
*/}}
{{- define "sluice.storeMaxBytes" -}}
{{- if .Values.store.maxBytes -}}
{{- .Values.store.maxBytes -}}
{{- else -}}
{{- $mem := .Values.resources.limits.memory | toString -}}
{{- if not (regexMatch "^[0-9]+(Ki|Mi|Gi|Ti|K|M|G|T)?$" $mem) -}}
{{- fail (printf "resources.limits.memory %q: the store cap is derived from a whole number with a unit (e.g. 2Gi, 1500Mi); set store.maxBytes otherwise" $mem) -}}
{{- end -}}
{{- $pct := int64 .Values.store.memoryPercent -}}
{{- if or (lt $pct 1) (gt $pct 90) -}}
{{- fail (printf "store.memoryPercent %v: want 1 to 90" .Values.store.memoryPercent) -}}
{{- end -}}
{{- $units := dict "" 1 "K" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 -}}
{{- $unit := regexFind "[KMGT]i?$" $mem -}}
{{- $bytes := mul (regexFind "^[0-9]+" $mem | int64) (get $units $unit) -}}
{{- $mib := div (div (mul $bytes $pct) 100) 1048576 -}}
{{- if lt $mib 1 -}}
{{- fail (printf "resources.limits.memory %q: %d%% of it is less than 1MiB" $mem $pct) -}}
{{- end -}}
{{- printf "%dMiB" $mib -}}
{{- end -}}
{{- end -}}
