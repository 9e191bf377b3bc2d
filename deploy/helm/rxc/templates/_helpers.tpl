{{- define "rxc.labels" -}}
app.kubernetes.io/part-of: rxc
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "rxc.image" -}}
{{- $img := index .root.Values.images .name -}}
{{- if not $img.tag }}{{ fail (printf "images.%s.tag is required: images are pinned" .name) }}{{ end -}}
{{- if eq (toString $img.tag) "latest" }}{{ fail (printf "images.%s.tag: pin a version, not latest" .name) }}{{ end -}}
{{- printf "%s%s:%s" .root.Values.images.registry $img.repository (toString $img.tag) -}}
{{- end -}}

{{- define "rxc.natsImage" -}}
{{- if not .Values.nats.version }}{{ fail "nats.version is required" }}{{ end -}}
{{- printf "nats:%s-alpine" (toString .Values.nats.version) -}}
{{- end -}}

{{- define "rxc.grpcHost" -}}{{ default (printf "grpc.%s" .Values.domain) .Values.grpcHost }}{{- end -}}
{{- define "rxc.natsHost" -}}{{ default (printf "nats.%s" .Values.domain) .Values.natsHost }}{{- end -}}

{{/* The cluster-internal NATS URLs: TLS, verified against the NATS CA (SSL_CERT_DIR). */}}
{{- define "rxc.natsURLs" -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.nats.replicas) -}}
{{- $urls = append $urls (printf "tls://rxc-nats-%d.rxc-nats-headless:4222" $i) -}}
{{- end -}}
{{- join "," $urls -}}
{{- end -}}

{{- define "rxc.provisionerSecret" -}}{{ default "rxc-provisioner" .Values.provisioner.existingSecret }}{{- end -}}
{{- define "rxc.controlplaneSecret" -}}{{ default "rxc-controlplane" .Values.controlplane.existingSecret }}{{- end -}}

{{- define "rxc.checkDSN" -}}
{{- if and .root.Values.postgres.requireTLS .dsn -}}
{{- if not (regexMatch "sslmode=verify-(full|ca)" .dsn) -}}
{{- fail (printf "%s.pgDSN must use sslmode=verify-full (or verify-ca): set postgres.requireTLS=false to allow otherwise" .name) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Hardened container security context. */}}
{{- define "rxc.restricted" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{- define "rxc.podSecurity" -}}
runAsNonRoot: true
runAsUser: {{ .uid }}
runAsGroup: {{ .uid }}
fsGroup: {{ .uid }}
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Trust for the services' outgoing TLS: the public roots plus the NATS CA (and PostgreSQL's CA). */}}
{{- define "rxc.trustEnv" -}}
- name: SSL_CERT_DIR
  value: /etc/ssl/certs:/etc/rxc/nats-ca
{{- end -}}

{{- define "rxc.trustMounts" -}}
- name: nats-ca
  mountPath: /etc/rxc/nats-ca
  readOnly: true
{{- if .Values.postgres.caSecret }}
- name: postgres-ca
  mountPath: /etc/rxc/postgres-ca
  readOnly: true
{{- end }}
{{- end -}}

{{- define "rxc.trustVolumes" -}}
- name: nats-ca
  secret:
    secretName: {{ .Values.tls.natsSecret }}
    items:
      - key: ca.crt
        path: nats-ca.crt
{{- if .Values.postgres.caSecret }}
- name: postgres-ca
  secret:
    secretName: {{ .Values.postgres.caSecret }}
    items:
      - key: ca.crt
        path: ca.crt
{{- end }}
{{- end -}}

{{/* Egress to PostgreSQL: the configured CIDRs, or any address, on 5432. */}}
{{- define "rxc.postgresEgress" -}}
{{- if .Values.networkPolicy.postgresCIDRs }}
to:
{{- range .Values.networkPolicy.postgresCIDRs }}
  - ipBlock: {cidr: {{ . }}}
{{- end }}
{{- end }}
ports:
  - {port: 5432, protocol: TCP}
{{- end -}}
