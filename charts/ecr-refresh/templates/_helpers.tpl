{{/*
Names, labels and the pieces the CronJob and the first-run Job share: every template takes
them from here, so a rename reaches the RBAC, the admission policy and the alerts at once.
*/}}

{{/* The chart's name, or nameOverride. */}}
{{- define "ecr-refresh.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The objects' name: fullnameOverride, else the release's name if it contains the chart's
name, else both. 52 characters at most: the CronJob's Jobs add an 11-character suffix and
a Job's name, as a label value, must fit in 63.
*/}}
{{- define "ecr-refresh.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := include "ecr-refresh.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* name-version, for the helm.sh/chart label. */}}
{{- define "ecr-refresh.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Every object's labels. app.kubernetes.io/name is the one the kustomize manifests set too;
the others are Helm's (tests/chart.rs leaves exactly these out when it compares).
*/}}
{{- define "ecr-refresh.labels" -}}
helm.sh/chart: {{ include "ecr-refresh.chart" . }}
{{ include "ecr-refresh.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "ecr-refresh.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ecr-refresh.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The ServiceAccount the runs use; RBAC and the admission policy name the same one. */}}
{{- define "ecr-refresh.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ecr-refresh.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* repository@digest when a digest is set (one image on every node), else repository:tag. */}}
{{- define "ecr-refresh.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
Namespaced scope reads no namespace list, so the selection must be literal names. The
schema says so too; this is the message for a value the schema can't see through (--set
of a comma-separated string).
*/}}
{{- define "ecr-refresh.checkScope" -}}
{{- if eq .Values.scope "namespaced" }}
{{- if .Values.namespaceSelector }}
{{- fail (printf "namespaceSelector %q: scope namespaced gives Roles in the listed namespaces only; a selector needs scope cluster" .Values.namespaceSelector) }}
{{- end }}
{{- range .Values.namespaces }}
{{- if or (eq . "all") (contains "*" .) (contains "?" .) (contains "," .) }}
{{- fail (printf "namespaces: %q is not a literal namespace name; scope namespaced gives a Role in each listed namespace, so list names (or use scope cluster)" .) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* name=value,… in key order, for ECR_REFRESH_PUSHGATEWAY_LABELS. */}}
{{- define "ecr-refresh.groupingLabels" -}}
{{- $pairs := list }}
{{- range $k, $v := .Values.pushgateway.groupingLabels }}
{{- $pairs = append $pairs (printf "%s=%s" $k $v) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}

{{/*
The spec of the Job each run is: the CronJob's jobTemplate.spec and the first-run hook's
spec. The comments of manifests/base/cronjob.yaml say why each field is what it is.
*/}}
{{- define "ecr-refresh.jobSpec" -}}
backoffLimit: {{ .Values.backoffLimit | int64 }}
activeDeadlineSeconds: {{ .Values.activeDeadlineSeconds | int64 }}
ttlSecondsAfterFinished: {{ .Values.ttlSecondsAfterFinished | int64 }}
# Exit 2 is a configuration error: no retry can fix it. An evicted or preempted pod is not
# the run's fault.
podFailurePolicy:
  rules:
    - action: FailJob
      onExitCodes:
        containerName: ecr-refresh
        operator: In
        values: [2]
    - action: Ignore
      onPodConditions:
        - type: DisruptionTarget
          status: "True"
template:
  metadata:
    labels:
      {{- include "ecr-refresh.labels" . | nindent 6 }}
      {{- with .Values.podLabels }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    {{- with .Values.podAnnotations }}
    annotations:
      {{- toYaml . | nindent 6 }}
    {{- end }}
  spec:
    # Each try a new pod, which keeps its logs and termination message.
    restartPolicy: Never
    terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds | int64 }}
    serviceAccountName: {{ include "ecr-refresh.serviceAccountName" . }}
    automountServiceAccountToken: true
    {{- with .Values.imagePullSecrets }}
    imagePullSecrets:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with .Values.priorityClassName }}
    priorityClassName: {{ . }}
    {{- end }}
    {{- with .Values.nodeSelector }}
    nodeSelector:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with .Values.tolerations }}
    tolerations:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with .Values.affinity }}
    affinity:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with .Values.podSecurityContext }}
    securityContext:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    containers:
      - name: ecr-refresh
        image: {{ include "ecr-refresh.image" . }}
        imagePullPolicy: {{ .Values.image.pullPolicy }}
        {{- with .Values.aws.existingSecret }}
        envFrom:
          - secretRef:
              name: {{ . }}
        {{- end }}
        env:
          - name: AWS_REGION
            value: {{ .Values.aws.region | quote }}
          - name: ECR_REFRESH_MODE
            value: {{ .Values.mode | quote }}
          - name: ECR_REFRESH_SECRET_NAME
            value: {{ .Values.secretName | quote }}
          - name: ECR_REFRESH_NAMESPACES
            value: {{ join "," .Values.namespaces | quote }}
          - name: ECR_REFRESH_EXCLUDE_NAMESPACES
            value: {{ join "," .Values.excludeNamespaces | quote }}
          - name: ECR_REFRESH_NAMESPACE_SELECTOR
            value: {{ .Values.namespaceSelector | quote }}
          - name: ECR_REFRESH_REGISTRIES
            value: {{ join "," .Values.registries | quote }}
          - name: ECR_REFRESH_DUAL_STACK
            value: {{ .Values.dualStack | toString | quote }}
          - name: ECR_REFRESH_DRY_RUN
            value: {{ .Values.dryRun | toString | quote }}
          - name: ECR_REFRESH_CONCURRENCY
            value: {{ .Values.concurrency | int64 | toString | quote }}
          - name: ECR_REFRESH_TIMEOUT
            value: {{ .Values.timeout | quote }}
          - name: ECR_REFRESH_LOG_FORMAT
            value: {{ .Values.logFormat | quote }}
          - name: ECR_REFRESH_SERVICE_ACCOUNTS
            value: {{ join "," .Values.serviceAccounts | quote }}
          - name: ECR_REFRESH_VERIFY_LOGIN
            value: {{ .Values.verifyLogin | toString | quote }}
          - name: ECR_REFRESH_RENEW_BEFORE
            value: {{ .Values.renewBefore | quote }}
          # Where the run's summary goes, for `kubectl describe pod`.
          - name: ECR_REFRESH_TERMINATION_LOG
            value: /dev/termination-log
          - name: ECR_REFRESH_PUSHGATEWAY_URL
            value: {{ .Values.pushgateway.url | quote }}
          - name: ECR_REFRESH_PUSHGATEWAY_LABELS
            value: {{ include "ecr-refresh.groupingLabels" . | quote }}
          - name: ECR_REFRESH_EVENTS
            value: {{ .Values.events | toString | quote }}
          {{- with .Values.extraEnv }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
        terminationMessagePath: /dev/termination-log
        terminationMessagePolicy: FallbackToLogsOnError
        {{- with .Values.resources }}
        resources:
          {{- toYaml . | nindent 10 }}
        {{- end }}
        {{- with .Values.securityContext }}
        securityContext:
          {{- toYaml . | nindent 10 }}
        {{- end }}
{{- end }}

{{/*
The rules every Role and the ClusterRole share, on the Secret and Events; the ClusterRole
adds namespaces: list. Rule 0's name follows secretName.
*/}}
{{- define "ecr-refresh.secretRules" -}}
# Read the Secret's uid and apply the fresh token: this Secret only, no other.
- apiGroups: [""]
  resources: ["secrets"]
  resourceNames: [{{ .Values.secretName | quote }}]
  verbs: ["get", "patch"]
# Create the Secret where it is missing. A create can't be narrowed to one name:
# authorization runs before the object exists. The admission policy does it.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["create"]
{{- end }}

{{- define "ecr-refresh.eventRules" -}}
# Warning Events for namespaces that failed (events). Best effort.
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create"]
{{- end }}

{{/*
check.podRights: what `ecr-refresh check` reads, read-only (manifests/components/check):
pods, for the images they pull and whether they are stuck pulling, and ServiceAccounts, for
their imagePullSecrets.
*/}}
{{- define "ecr-refresh.checkRules" -}}
{{- if .Values.check.podRights }}
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list"]
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get"]
{{- end }}
{{- end }}

{{/* get and patch on the ServiceAccounts named in serviceAccounts, and on no other. */}}
{{- define "ecr-refresh.serviceAccountRules" -}}
{{- with .Values.serviceAccounts }}
- apiGroups: [""]
  resources: ["serviceaccounts"]
  resourceNames: {{ toJson . }}
  verbs: ["get", "patch"]
{{- end }}
{{- end }}
