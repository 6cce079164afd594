{{/*
Names. Kubernetes names are limited to 63 characters; suffixes like
"-runner-gateway" (15) must still fit, hence the 48-character prefix.
*/}}
{{- define "corkboard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "corkboard.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 48 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 48 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 48 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "corkboard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "corkboard.serverName" -}}
{{- printf "%s-server" (include "corkboard.fullname" .) -}}
{{- end -}}

{{- define "corkboard.runnerName" -}}
{{- printf "%s-runner" (include "corkboard.fullname" .) -}}
{{- end -}}

{{- define "corkboard.gatewayName" -}}
{{- printf "%s-runner-gateway" (include "corkboard.fullname" .) -}}
{{- end -}}

{{- define "corkboard.configName" -}}
{{- printf "%s-config" (include "corkboard.fullname" .) -}}
{{- end -}}

{{/* Labels shared by every resource. */}}
{{- define "corkboard.labels" -}}
helm.sh/chart: {{ include "corkboard.chart" . }}
app.kubernetes.io/name: {{ include "corkboard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: corkboard
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: call with (dict "ctx" $ "component" "server"). */}}
{{- define "corkboard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "corkboard.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Full labels of one component: call with (dict "ctx" $ "component" "server"). */}}
{{- define "corkboard.componentLabels" -}}
{{ include "corkboard.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "corkboard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "corkboard.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "corkboard.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "corkboard.namespaceDomain" -}}
{{- printf "%s.svc.%s" .Release.Namespace .Values.clusterDomain -}}
{{- end -}}

{{/* Secret names: the existing Secret when given, else the chart-created one. */}}
{{- define "corkboard.jwtSecretName" -}}
{{- default (printf "%s-jwt" (include "corkboard.fullname" .)) .Values.secrets.jwt.existingSecret -}}
{{- end -}}

{{- define "corkboard.sessionKeySecretName" -}}
{{- default (printf "%s-session-key" (include "corkboard.fullname" .)) .Values.secrets.sessionKey.existingSecret -}}
{{- end -}}

{{- define "corkboard.mongodbSecretName" -}}
{{- default (printf "%s-mongodb" (include "corkboard.fullname" .)) .Values.secrets.mongodbUri.existingSecret -}}
{{- end -}}

{{- define "corkboard.redisSecretName" -}}
{{- default (printf "%s-redis" (include "corkboard.fullname" .)) .Values.secrets.redisUrl.existingSecret -}}
{{- end -}}

{{- define "corkboard.upstreamKeySecretName" -}}
{{- default (printf "%s-upstream-key" (include "corkboard.fullname" .)) .Values.secrets.upstreamKey.existingSecret -}}
{{- end -}}

{{/*
What the pods' Secrets hold now, for the pods' checksum annotation: the
values that name them plus, for every Secret that already exists, its data
(lookup; empty under `helm template`). Changing an existing Secret's data
and running `helm upgrade` rolls the pods, so they read the new keys.
*/}}
{{- define "corkboard.secretsChecksum" -}}
{{- $names := list (include "corkboard.jwtSecretName" .) (include "corkboard.sessionKeySecretName" .) (include "corkboard.upstreamKeySecretName" .) (include "corkboard.mongodbSecretName" .) (include "corkboard.redisSecretName" .) -}}
{{- with .Values.secrets.redisTls.existingSecret }}{{ $names = append $names . }}{{ end -}}
{{- with .Values.secrets.mongodbTls.existingSecret }}{{ $names = append $names . }}{{ end -}}
{{- with .Values.config.otlp.headersSecret }}{{ $names = append $names . }}{{ end -}}
{{- $live := dict -}}
{{- range $names | uniq -}}
{{- $secret := lookup "v1" "Secret" $.Release.Namespace . -}}
{{- if $secret }}{{ $_ := set $live . ($secret.data | default dict) }}{{ end -}}
{{- end -}}
{{- list $.Values.secrets $live | toJson | sha256sum -}}
{{- end -}}

{{/* Seconds left for the process after preStop (the drains and the audit flush); fails the render when under 10. */}}
{{- define "corkboard.shutdownGraceMs" -}}
{{- $left := sub (int .role.terminationGracePeriodSeconds) (int .role.preStopSleepSeconds) -}}
{{- if lt $left 10 -}}
{{- fail (printf "%s: terminationGracePeriodSeconds (%d) minus preStopSleepSeconds (%d) leaves %ds for the drains and the audit flush; at least 10 s are needed (raise terminationGracePeriodSeconds)" .component (int .role.terminationGracePeriodSeconds) (int .role.preStopSleepSeconds) $left) -}}
{{- end -}}
{{- mul $left 1000 -}}
{{- end -}}

{{/* `path` of each previous key of a Secret, as TOML array items. */}}
{{- define "corkboard.previousFiles" -}}
[
{{- range $i, $_ := .keys }}
  {{ printf "%s/previous-%d" $.dir $i | toJson }},
{{- end }}
]
{{- end -}}

{{/* HS256 verifies with a shared secret; RS256/EdDSA with a public key file. */}}
{{- define "corkboard.jwtUsesSecret" -}}
{{- if eq .Values.config.jwt.algorithm "HS256" }}true{{ end -}}
{{- end -}}

{{- define "corkboard.jwtFile" -}}
{{- if include "corkboard.jwtUsesSecret" . -}}
/var/run/secrets/corkboard/jwt/secret
{{- else -}}
/var/run/secrets/corkboard/jwt/public-key.pem
{{- end -}}
{{- end -}}

{{- define "corkboard.serverUrl" -}}
{{- printf "http://%s.%s.svc:%d" (include "corkboard.serverName" .) .Release.Namespace (int .Values.server.service.port) -}}
{{- end -}}

{{- define "corkboard.publicUrl" -}}
{{- if .Values.config.publicUrl -}}
{{- .Values.config.publicUrl | trimSuffix "/" -}}
{{- else if and .Values.ingress.enabled .Values.ingress.hosts -}}
{{- $host := (first .Values.ingress.hosts).host -}}
{{- $tls := false -}}
{{- range .Values.ingress.tls -}}
{{- if has $host (.hosts | default list) -}}{{- $tls = true -}}{{- end -}}
{{- end -}}
{{- printf "%s://%s" (ternary "https" "http" $tls) $host -}}
{{- else -}}
{{- include "corkboard.serverUrl" . -}}
{{- end -}}
{{- end -}}

{{- define "corkboard.gatewayPublicUrl" -}}
{{- if .Values.config.gatewayPublicUrl -}}
{{- .Values.config.gatewayPublicUrl | trimSuffix "/" -}}
{{- else -}}
{{- printf "http://%s.%s.svc:%d" (include "corkboard.gatewayName" .) .Release.Namespace (int .Values.runner.gatewayService.port) -}}
{{- end -}}
{{- end -}}

{{/*
Host names the MCP endpoints accept: every DNS form of the server and gateway
Services (short, namespaced, svc, fully qualified), the Ingress hosts, the
hosts of the public URLs and the operator's extra hosts, as a multi-line
TOML array (JSON strings are valid TOML basic strings).
*/}}
{{- define "corkboard.allowedHosts" -}}
{{- $hosts := list -}}
{{- range $svc := list (include "corkboard.serverName" .) (include "corkboard.gatewayName" .) -}}
{{- $hosts = append $hosts $svc -}}
{{- $hosts = append $hosts (printf "%s.%s" $svc $.Release.Namespace) -}}
{{- $hosts = append $hosts (printf "%s.%s.svc" $svc $.Release.Namespace) -}}
{{- $hosts = append $hosts (printf "%s.%s" $svc (include "corkboard.namespaceDomain" $)) -}}
{{- end -}}
{{- if .Values.ingress.enabled -}}
{{- range .Values.ingress.hosts -}}
{{- $hosts = append $hosts .host -}}
{{- end -}}
{{- end -}}
{{- $hosts = append $hosts (urlParse (include "corkboard.publicUrl" .)).hostname -}}
{{- $hosts = append $hosts (urlParse (include "corkboard.gatewayPublicUrl" .)).hostname -}}
{{- range .Values.config.allowedHosts -}}
{{- $hosts = append $hosts . -}}
{{- end -}}
[
{{- range $hosts | compact | uniq }}
  {{ . | toJson }},
{{- end }}
]
{{- end -}}

{{/* The rendered config.toml. Strings go through toJson: a JSON string is a valid TOML basic string. */}}
{{- define "corkboard.configToml" -}}
# Rendered by the corkboard Helm chart.
# Secrets are not in this file: the MongoDB URI and Redis URL come from
# CORKBOARD_MONGODB_URI and CORKBOARD_REDIS_URL, key material from the
# mounted Secret files below.
listen = "0.0.0.0:4891"
# Only the embedded defaults use the data dir; point it at the writable /tmp
# emptyDir since the root filesystem is read-only.
data_dir = "/tmp/corkboard"
store = "mongodb"
mongodb_database = {{ .Values.config.mongodbDatabase | toJson }}
registry = "redis"
redis_key_prefix = {{ .Values.config.redisKeyPrefix | toJson }}
jwt_algorithm = {{ .Values.config.jwt.algorithm | toJson }}
{{- if include "corkboard.jwtUsesSecret" . }}
jwt_secret_file = {{ include "corkboard.jwtFile" . | toJson }}
{{- else }}
jwt_public_key_file = {{ include "corkboard.jwtFile" . | toJson }}
{{- end }}
jwt_issuer = {{ .Values.config.jwt.issuer | toJson }}
jwt_audience = {{ .Values.config.jwt.audience | toJson }}
session_key_file = "/var/run/secrets/corkboard/session/key"
upstream_key_file = "/var/run/secrets/corkboard/upstream/key"
{{- with .Values.secrets.jwt.previousKeys }}
jwt_previous_key_files = {{ include "corkboard.previousFiles" (dict "keys" . "dir" "/var/run/secrets/corkboard/jwt") }}
{{- end }}
{{- with .Values.secrets.sessionKey.previousKeys }}
session_previous_key_files = {{ include "corkboard.previousFiles" (dict "keys" . "dir" "/var/run/secrets/corkboard/session") }}
{{- end }}
{{- with .Values.secrets.upstreamKey.previousKeys }}
upstream_previous_key_files = {{ include "corkboard.previousFiles" (dict "keys" . "dir" "/var/run/secrets/corkboard/upstream") }}
{{- end }}
{{- with .Values.secrets.redisTls }}
{{- if .existingSecret }}
{{- if .caKey }}
redis_tls_ca_file = "/var/run/secrets/corkboard/redis-tls/ca.crt"
{{- end }}
{{- if .certKey }}
redis_tls_cert_file = "/var/run/secrets/corkboard/redis-tls/client.crt"
redis_tls_key_file = "/var/run/secrets/corkboard/redis-tls/client.key"
{{- end }}
{{- end }}
{{- end }}
{{- if .Values.secrets.mongodbTls.existingSecret }}
mongodb_tls_ca_file = "/var/run/secrets/corkboard/mongodb-tls/ca.crt"
{{- end }}
metrics_listen = {{ printf "0.0.0.0:%d" (int .Values.metrics.port) | toJson }}
log_format = {{ .Values.config.logFormat | toJson }}
public_url = {{ include "corkboard.publicUrl" . | toJson }}
gateway_mode = "shared"
gateway_listen = "0.0.0.0:4892"
gateway_public_url = {{ include "corkboard.gatewayPublicUrl" . | toJson }}
allowed_hosts = {{ include "corkboard.allowedHosts" . }}
rate_limit_per_second = {{ .Values.config.rateLimitPerSecond | int }}
rate_limit_burst = {{ .Values.config.rateLimitBurst | int }}
{{- with .Values.config.otlpEndpoint }}
otlp_endpoint = {{ . | toJson }}
{{- end }}
{{- with .Values.config.extraToml }}
{{ . | trim }}
{{- end }}
{{- end -}}

{{/*
Pod template shared by both roles: call with
(dict "ctx" $ "component" "server" "role" .Values.server "args" (list ...)).
*/}}
{{- define "corkboard.podTemplate" -}}
{{- $ctx := .ctx -}}
{{- $role := .role -}}
metadata:
  labels:
    {{- include "corkboard.componentLabels" (dict "ctx" $ctx "component" .component) | nindent 4 }}
    {{- with $role.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    checksum/config: {{ include "corkboard.configToml" $ctx | sha256sum }}
    checksum/secrets: {{ include "corkboard.secretsChecksum" $ctx }}
    {{- with $role.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "corkboard.serviceAccountName" $ctx }}
  automountServiceAccountToken: false
  enableServiceLinks: false
  {{- with $ctx.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml $ctx.Values.podSecurityContext | nindent 4 }}
  terminationGracePeriodSeconds: {{ $role.terminationGracePeriodSeconds }}
  containers:
    - name: {{ .component }}
      image: {{ include "corkboard.image" $ctx | quote }}
      imagePullPolicy: {{ $ctx.Values.image.pullPolicy }}
      args:
        {{- toYaml .args | nindent 8 }}
      ports:
        - name: http
          containerPort: 4891
          protocol: TCP
        {{- if eq .component "runner" }}
        - name: gateway
          containerPort: 4892
          protocol: TCP
        {{- end }}
        - name: metrics
          containerPort: {{ $ctx.Values.metrics.port }}
          protocol: TCP
      env:
        # The time the process has after SIGTERM: its drains fit in it.
        - name: CORKBOARD_SHUTDOWN_GRACE_MS
          value: {{ include "corkboard.shutdownGraceMs" (dict "role" $role "component" .component) | quote }}
        {{- with $role.egressAllow }}
        - name: CORKBOARD_EGRESS_ALLOW
          value: {{ join "," . | quote }}
        {{- end }}
        {{- if eq .component "server" }}
        {{- with $role.webhookAllowedHosts }}
        - name: CORKBOARD_WEBHOOK_ALLOWED_HOSTS
          value: {{ join "," . | quote }}
        {{- end }}
        {{- end }}
        {{- if $ctx.Values.config.otlpEndpoint }}
        - name: K8S_POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        - name: K8S_NAMESPACE_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        - name: K8S_NODE_NAME
          valueFrom:
            fieldRef:
              fieldPath: spec.nodeName
        - name: OTEL_RESOURCE_ATTRIBUTES
          value: "k8s.pod.name=$(K8S_POD_NAME),k8s.namespace.name=$(K8S_NAMESPACE_NAME),k8s.node.name=$(K8S_NODE_NAME),k8s.deployment.name={{ include (printf "corkboard.%sName" .component) $ctx }}"
        - name: OTEL_TRACES_SAMPLER
          value: parentbased_traceidratio
        - name: OTEL_TRACES_SAMPLER_ARG
          value: {{ $ctx.Values.config.otlp.samplingRatio | toString | quote }}
        {{- with $ctx.Values.config.otlp.headersSecret }}
        - name: OTEL_EXPORTER_OTLP_HEADERS
          valueFrom:
            secretKeyRef:
              name: {{ . }}
              key: {{ $ctx.Values.config.otlp.headersKey }}
        {{- end }}
        {{- end }}
        - name: CORKBOARD_MONGODB_URI
          valueFrom:
            secretKeyRef:
              name: {{ include "corkboard.mongodbSecretName" $ctx }}
              key: {{ $ctx.Values.secrets.mongodbUri.key }}
        - name: CORKBOARD_REDIS_URL
          valueFrom:
            secretKeyRef:
              name: {{ include "corkboard.redisSecretName" $ctx }}
              key: {{ $ctx.Values.secrets.redisUrl.key }}
        {{- with $role.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      startupProbe:
        httpGet:
          path: /healthz
          port: http
        periodSeconds: {{ $ctx.Values.probes.startup.periodSeconds }}
        failureThreshold: {{ $ctx.Values.probes.startup.failureThreshold }}
      livenessProbe:
        {{- if eq .component "runner" }}
        # The gateway port is what sandboxes use: a runner whose gateway
        # listener is gone is restarted. (/healthz of the HTTP port is the
        # startup probe's.)
        tcpSocket:
          port: gateway
        {{- else }}
        httpGet:
          path: /healthz
          port: http
        {{- end }}
        periodSeconds: {{ $ctx.Values.probes.liveness.periodSeconds }}
        timeoutSeconds: {{ $ctx.Values.probes.liveness.timeoutSeconds }}
        failureThreshold: {{ $ctx.Values.probes.liveness.failureThreshold }}
      readinessProbe:
        httpGet:
          path: /readyz
          port: http
        periodSeconds: {{ $ctx.Values.probes.readiness.periodSeconds }}
        timeoutSeconds: {{ $ctx.Values.probes.readiness.timeoutSeconds }}
        failureThreshold: {{ $ctx.Values.probes.readiness.failureThreshold }}
      {{- if gt (int $role.preStopSleepSeconds) 0 }}
      lifecycle:
        preStop:
          sleep:
            seconds: {{ $role.preStopSleepSeconds }}
      {{- end }}
      resources:
        {{- toYaml $role.resources | nindent 8 }}
      securityContext:
        {{- toYaml $ctx.Values.containerSecurityContext | nindent 8 }}
      volumeMounts:
        - name: config
          mountPath: /etc/corkboard/config.toml
          subPath: config.toml
          readOnly: true
        - name: jwt
          mountPath: /var/run/secrets/corkboard/jwt
          readOnly: true
        - name: session-key
          mountPath: /var/run/secrets/corkboard/session
          readOnly: true
        - name: upstream-key
          mountPath: /var/run/secrets/corkboard/upstream
          readOnly: true
        {{- if $ctx.Values.secrets.redisTls.existingSecret }}
        - name: redis-tls
          mountPath: /var/run/secrets/corkboard/redis-tls
          readOnly: true
        {{- end }}
        {{- if $ctx.Values.secrets.mongodbTls.existingSecret }}
        - name: mongodb-tls
          mountPath: /var/run/secrets/corkboard/mongodb-tls
          readOnly: true
        {{- end }}
        - name: tmp
          mountPath: /tmp
  volumes:
    - name: config
      configMap:
        name: {{ include "corkboard.configName" $ctx }}
        items:
          - key: config.toml
            path: config.toml
    - name: jwt
      secret:
        secretName: {{ include "corkboard.jwtSecretName" $ctx }}
        defaultMode: 288  # 0440: owner and the fsGroup may read
        items:
          - key: {{ $ctx.Values.secrets.jwt.key }}
            path: {{ base (include "corkboard.jwtFile" $ctx) }}
          {{- range $i, $key := $ctx.Values.secrets.jwt.previousKeys }}
          - key: {{ $key }}
            path: previous-{{ $i }}
          {{- end }}
    - name: session-key
      secret:
        secretName: {{ include "corkboard.sessionKeySecretName" $ctx }}
        defaultMode: 288  # 0440: owner and the fsGroup may read
        items:
          - key: {{ $ctx.Values.secrets.sessionKey.key }}
            path: key
          {{- range $i, $key := $ctx.Values.secrets.sessionKey.previousKeys }}
          - key: {{ $key }}
            path: previous-{{ $i }}
          {{- end }}
    - name: upstream-key
      secret:
        secretName: {{ include "corkboard.upstreamKeySecretName" $ctx }}
        defaultMode: 288  # 0440: owner and the fsGroup may read
        items:
          - key: {{ $ctx.Values.secrets.upstreamKey.key }}
            path: key
          {{- range $i, $key := $ctx.Values.secrets.upstreamKey.previousKeys }}
          - key: {{ $key }}
            path: previous-{{ $i }}
          {{- end }}
    {{- with $ctx.Values.secrets.redisTls }}
    {{- if .existingSecret }}
    - name: redis-tls
      secret:
        secretName: {{ .existingSecret }}
        defaultMode: 288  # 0440: owner and the fsGroup may read
        items:
          {{- if .caKey }}
          - key: {{ .caKey }}
            path: ca.crt
          {{- end }}
          {{- if .certKey }}
          - key: {{ .certKey }}
            path: client.crt
          - key: {{ required "secrets.redisTls.keyKey is required with certKey" .keyKey }}
            path: client.key
          {{- end }}
    {{- end }}
    {{- end }}
    {{- with $ctx.Values.secrets.mongodbTls }}
    {{- if .existingSecret }}
    - name: mongodb-tls
      secret:
        secretName: {{ .existingSecret }}
        defaultMode: 288  # 0440: owner and the fsGroup may read
        items:
          - key: {{ .caKey }}
            path: ca.crt
    {{- end }}
    {{- end }}
    - name: tmp
      emptyDir:
        {{- with $ctx.Values.tmpVolume.medium }}
        medium: {{ . }}
        {{- end }}
        sizeLimit: {{ $ctx.Values.tmpVolume.sizeLimit }}
  {{- with $role.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $role.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $role.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if or $role.spreadAcrossNodes $role.spreadAcrossZones $role.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- if $role.spreadAcrossNodes }}
    - maxSkew: 1
      topologyKey: kubernetes.io/hostname
      whenUnsatisfiable: ScheduleAnyway
      labelSelector:
        matchLabels:
          {{- include "corkboard.selectorLabels" (dict "ctx" $ctx "component" .component) | nindent 10 }}
    {{- end }}
    {{- if $role.spreadAcrossZones }}
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: ScheduleAnyway
      labelSelector:
        matchLabels:
          {{- include "corkboard.selectorLabels" (dict "ctx" $ctx "component" .component) | nindent 10 }}
    {{- end }}
    {{- with $role.topologySpreadConstraints }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
{{- end -}}

{{/* One generated or provided secret value, base64 encoded; reuses the live value on upgrade. */}}
{{- define "corkboard.secretData" -}}
{{- if .value -}}
{{- .value | b64enc -}}
{{- else -}}
{{- $live := lookup "v1" "Secret" .ctx.Release.Namespace .name -}}
{{- if and $live $live.data (hasKey $live.data .key) -}}
{{- index $live.data .key -}}
{{- else if .generate -}}
{{- randAlphaNum 48 | b64enc -}}
{{- else -}}
{{- fail .missing -}}
{{- end -}}
{{- end -}}
{{- end -}}
