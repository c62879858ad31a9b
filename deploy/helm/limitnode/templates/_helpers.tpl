{{/* The name of every object: the release's, unless it lacks the chart's name. */}}
{{- define "limitnode.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The headless Service that gives each pod its peer DNS name. */}}
{{- define "limitnode.peers" -}}
{{- printf "%s-peers" (include "limitnode.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "limitnode.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "limitnode.labels" -}}
{{ include "limitnode.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* "true" unless the insecure variant was asked for by its name. */}}
{{- define "limitnode.secure" -}}
{{- if not .Values.insecureDisableTLSAndAuth -}}true{{- end -}}
{{- end -}}

{{/* Where the Secrets are mounted. */}}
{{- define "limitnode.tlsDir" -}}/etc/limitnode/tls{{- end -}}
{{- define "limitnode.authDir" -}}/etc/limitnode/auth{{- end -}}

{{/* Every pod's HTTP address by its peer name: -join. */}}
{{- define "limitnode.join" -}}
{{- $peers := include "limitnode.peers" . -}}
{{- $name := include "limitnode.fullname" . -}}
{{- $port := .Values.ports.http -}}
{{- $addrs := list -}}
{{- range $i := until (int .Values.replicas) -}}
{{- $addrs = append $addrs (printf "%s-%d.%s:%v" $name $i $peers $port) -}}
{{- end -}}
{{- join "," $addrs -}}
{{- end -}}
