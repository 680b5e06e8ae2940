{{/* Labels every object carries; the kustomize bases use the same app.kubernetes.io/name values. */}}
{{- define "driftguard.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/part-of: driftguard
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{- define "driftguard.image" -}}
{{ printf "%s:%s" .Values.image.repository .Values.image.tag }}
{{- end -}}

{{/* The pod-level settings both services share. */}}
{{- define "driftguard.podSpecCommon" -}}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The Argo CD API settings and mounts both services share. */}}
{{- define "driftguard.argocdEnv" -}}
- name: DRIFTGUARD_ARGOCD_URL
  value: {{ .Values.argocd.url | quote }}
- name: DRIFTGUARD_ARGOCD_CA_FILE
  value: /etc/driftguard/argocd-ca/{{ .Values.argocd.caSecret.key }}
- name: DRIFTGUARD_ARGOCD_CM_FILE
  value: /etc/driftguard/argocd-cm
{{- end -}}

{{- define "driftguard.argocdVolumes" -}}
- name: argocd-cm
  configMap:
    name: {{ .Values.argocd.configMap }}
- name: argocd-ca
  secret:
    secretName: {{ .Values.argocd.caSecret.name }}
    items:
      - key: {{ .Values.argocd.caSecret.key }}
        path: {{ .Values.argocd.caSecret.key }}
- name: tmp
  emptyDir: {}
{{- end -}}

{{- define "driftguard.argocdMounts" -}}
- {name: argocd-cm, mountPath: /etc/driftguard/argocd-cm, readOnly: true}
- {name: argocd-ca, mountPath: /etc/driftguard/argocd-ca, readOnly: true}
- {name: tmp, mountPath: /tmp}
{{- end -}}

{{- define "driftguard.monitoring" -}}
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" -}}true{{- end -}}
{{- end -}}

{{- /* issue 31: the masks' HMAC key, one Secret value for both services (docs/security.md) */ -}}
{{- define "driftguard.redactEnv" -}}
- name: DRIFTGUARD_REDACT_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.redaction.existingSecret }}
      key: {{ .Values.redaction.key }}
{{- end -}}
