{{- define "payment.labels" -}}
app.kubernetes.io/name: payment
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
