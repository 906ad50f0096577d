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
resources.limits.memory in bytes. The limit must be a whole number with an
optional unit (Ki Mi Gi Ti, or K M G T): GOMEMLIMIT and the store cap are
derived from it.
*/}}
{{- define "sluice.memoryLimitBytes" -}}
{{- $mem := .Values.resources.limits.memory | toString -}}
{{- if not (regexMatch "^[0-9]+(Ki|Mi|Gi|Ti|K|M|G|T)?$" $mem) -}}
{{- fail (printf "resources.limits.memory %q: GOMEMLIMIT and the store cap are derived from a whole number with a unit (e.g. 2Gi, 1500Mi)" $mem) -}}
{{- end -}}
{{- $units := dict "" 1 "K" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 -}}
{{- $unit := regexFind "[KMGT]i?$" $mem -}}
{{- mul (regexFind "^[0-9]+" $mem | int64) (get $units $unit) -}}
{{- end -}}

{{/*
GOMEMLIMIT: 90% of resources.limits.memory rounded down to a MiB, the share
`sluice serve` takes of the container's limit by default, leaving the rest
for what the Go runtime does not count (stacks of the OS, cgo, page cache).
*/}}
{{- define "sluice.goMemLimit" -}}
{{- $bytes := include "sluice.memoryLimitBytes" . | int64 -}}
{{- $mib := div (div (mul $bytes 90) 100) 1048576 -}}
{{- if lt $mib 1 -}}
{{- fail (printf "resources.limits.memory %q: 90%% of it (GOMEMLIMIT) is less than 1MiB" (toString .Values.resources.limits.memory)) -}}
{{- end -}}
{{- printf "%dMiB" $mib -}}
{{- end -}}

{{/*
The store's memory cap (--store-max-bytes): store.maxBytes, or
store.memoryPercent of resources.limits.memory rounded down to a MiB.
*/}}
{{- define "sluice.storeMaxBytes" -}}
{{- if .Values.store.maxBytes -}}
{{- .Values.store.maxBytes -}}
{{- else -}}
{{- $pct := int64 .Values.store.memoryPercent -}}
{{- if or (lt $pct 1) (gt $pct 90) -}}
{{- fail (printf "store.memoryPercent %v: want 1 to 90" .Values.store.memoryPercent) -}}
{{- end -}}
{{- $bytes := include "sluice.memoryLimitBytes" . | int64 -}}
{{- $mib := div (div (mul $bytes $pct) 100) 1048576 -}}
{{- if lt $mib 1 -}}
{{- fail (printf "resources.limits.memory %q: %d%% of it is less than 1MiB" (toString .Values.resources.limits.memory) $pct) -}}
{{- end -}}
{{- printf "%dMiB" $mib -}}
{{- end -}}
{{- end -}}

{{/* The Secret of the cluster secret: existing, generated, or none (insecure). */}}
{{- define "sluice.clusterSecretName" -}}
{{- if not .Values.insecure -}}
{{- .Values.clusterSecret.existingSecret | default (printf "%s-cluster-secret" (include "sluice.fullname" .)) -}}
{{- end -}}
{{- end -}}

{{/* The Secret of the public listeners' certificate, or none (no TLS). */}}
{{- define "sluice.tlsSecretName" -}}
{{- if and .Values.tls.certManager.enabled .Values.tls.existingSecret -}}
{{- fail "tls.certManager.enabled and tls.existingSecret: choose one source of the certificate" -}}
{{- end -}}
{{- if .Values.tls.certManager.enabled -}}
{{- printf "%s-server-tls" (include "sluice.fullname" .) -}}
{{- else -}}
{{- .Values.tls.existingSecret -}}
{{- end -}}
{{- end -}}

{{/* The Secret of the peer certificate, or none (no peer mTLS). */}}
{{- define "sluice.peerTLSSecretName" -}}
{{- if and .Values.peerTLS.certManager.enabled .Values.peerTLS.existingSecret -}}
{{- fail "peerTLS.certManager.enabled and peerTLS.existingSecret: choose one source of the certificate" -}}
{{- end -}}
{{- if .Values.peerTLS.certManager.enabled -}}
{{- printf "%s-peer-tls" (include "sluice.fullname" .) -}}
{{- else -}}
{{- .Values.peerTLS.existingSecret -}}
{{- end -}}
{{- end -}}

{{/*
The values that contradict each other, refused by name: rendered by the
StatefulSet, so every install sees them.
*/}}
{{- define "sluice.validateSecurity" -}}
{{- $tls := include "sluice.tlsSecretName" . -}}
{{- $peer := include "sluice.peerTLSSecretName" . -}}
{{- if and .Values.insecure (or .Values.clusterSecret.existingSecret $peer) -}}
{{- fail "insecure: true with clusterSecret.existingSecret or peerTLS: insecure turns cluster authentication off; drop one" -}}
{{- end -}}
{{- if and $tls (not $peer) -}}
{{- fail "tls without peerTLS: the peer service would take the public certificate, which lacks the peer name; set peerTLS.certManager or peerTLS.existingSecret" -}}
{{- end -}}
{{- if and .Values.tls.requireClientCert (not $tls) -}}
{{- fail "tls.requireClientCert without tls.certManager.enabled or tls.existingSecret" -}}
{{- end -}}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.certManager.issuerRef.name) -}}
{{- fail "tls.certManager.issuerRef.name is required with tls.certManager.enabled" -}}
{{- end -}}
{{- if and .Values.peerTLS.certManager.enabled (not .Values.peerTLS.certManager.issuerRef.name) -}}
{{- fail "peerTLS.certManager.issuerRef.name is required with peerTLS.certManager.enabled" -}}
{{- end -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$" (toString .Values.peerTLS.name)) -}}
{{- fail (printf "peerTLS.name %q: want a DNS name" (toString .Values.peerTLS.name)) -}}
{{- end -}}
{{- end -}}
