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
the others are Helm's (tests/real/chart.rs leaves exactly these out when it compares).
*/}}
{{- define "ecr-refresh.labels" -}}
helm.sh/chart: {{ include "ecr-refresh.chart" . }}
{{ include "ecr-refresh.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- /* The labels, with app.kubernetes.io/component naming the part: (list $ctx "rbac"). */}}
{{- define "ecr-refresh.componentLabels" -}}
{{ include "ecr-refresh.labels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{- define "ecr-refresh.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ecr-refresh.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The check's own ServiceAccount, ClusterRole (or Roles) and bindings, <fullname>-check:
rendered with check.podRights, or for a release in mode check. The check writes nothing, so
its account is granted nothing to write, and the refresh's account no right to read pods.
*/}}
{{- define "ecr-refresh.checkAccount" -}}
{{- or .Values.check.podRights (eq .Values.mode "check") }}
{{- end }}

{{- define "ecr-refresh.checkName" -}}
{{- printf "%s-check" (include "ecr-refresh.fullname" .) }}
{{- end }}

{{/* The ServiceAccount a run's pod uses: the check's in mode check, else the refresh's. */}}
{{- define "ecr-refresh.podServiceAccountName" -}}
{{- if eq .Values.mode "check" }}
{{- include "ecr-refresh.checkName" . }}
{{- else }}
{{- include "ecr-refresh.serviceAccountName" . }}
{{- end }}
{{- end }}

{{/* The ServiceAccount the runs use; RBAC and the admission policy name the same one. */}}
{{- define "ecr-refresh.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ecr-refresh.fullname" .) .Values.serviceAccount.name }}
{{- else if .Values.serviceAccount.name }}
{{- .Values.serviceAccount.name }}
{{- else }}
{{- /* The namespace's `default` account would gain Secret create in every namespace, and
the policy would hold every workload that runs as it. */}}
{{- fail "serviceAccount.create is false and serviceAccount.name is empty: name the existing ServiceAccount ecr-refresh runs as (not `default`, which every pod of the namespace runs as), or set serviceAccount.create=true" }}
{{- end }}
{{- end }}

{{/* repository@digest when a digest is set (one image on every node), else repository:tag. */}}
{{- /* global.imageRegistry, the convention of umbrella charts, replaces the registry host of
image.repository (its first part, when that names a host). */}}
{{- define "ecr-refresh.image" -}}
{{- $repository := .Values.image.repository }}
{{- with (.Values.global | default dict).imageRegistry }}
{{- $parts := splitList "/" $repository }}
{{- if and (gt (len $parts) 1) (or (contains "." (first $parts)) (contains ":" (first $parts)) (eq (first $parts) "localhost")) }}
{{- $parts = rest $parts }}
{{- end }}
{{- $repository = printf "%s/%s" (trimSuffix "/" .) (join "/" $parts) }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- /* imagePullSecrets, then global.imagePullSecrets (names, or {name: …}). */}}
{{- define "ecr-refresh.imagePullSecrets" -}}
{{- $all := list }}
{{- range .Values.imagePullSecrets }}
{{- $all = append $all . }}
{{- end }}
{{- range (.Values.global | default dict).imagePullSecrets }}
{{- $all = append $all (ternary (dict "name" .) . (kindIs "string" .)) }}
{{- end }}
{{- with $all }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/* The names imagePullSecrets lists, the chart's and the global ones, comma-separated. */}}
{{- define "ecr-refresh.imagePullSecretNames" -}}
{{- $names := list }}
{{- range (include "ecr-refresh.imagePullSecrets" . | fromYamlArray) }}
{{- $names = append $names .name }}
{{- end }}
{{- join "," $names }}
{{- end }}

{{/*
Namespaced scope reads no namespace list, so the selection must be literal names. The
schema says so too; this is the message for a value the schema can't see through (--set
of a comma-separated string).
*/}}
{{- define "ecr-refresh.checkScope" -}}
{{- /* The ClusterRoles, their bindings and the admission policy are cluster-wide and named by
the full name alone, so one full name serves one release per cluster. Helm's own refusal of
another release's object names neither; this one says what to do. (lookup sees the cluster on
install and upgrade; helm template sees none.) */}}
{{- range $name := list (include "ecr-refresh.fullname" .) (include "ecr-refresh.checkName" .) (printf "%s-admission" (include "ecr-refresh.fullname" .)) }}
{{- with lookup "rbac.authorization.k8s.io/v1" "ClusterRole" "" $name }}
{{- $owner := index (.metadata.annotations | default dict) "meta.helm.sh/release-namespace" | default "" }}
{{- if and $owner (ne $owner $.Release.Namespace) }}
{{- fail (printf "ClusterRole %s already belongs to a release in namespace %s: the chart's cluster-wide objects (ClusterRoles, their bindings, the admission policy) are named by the release's full name, so one full name serves one release per cluster; install this one under another release name, or set fullnameOverride" $name $owner) }}
{{- end }}
{{- end }}
{{- end }}
{{- /* Self-hosting from ECR: a pod that pulls ecr-refresh's own image with the pull Secret
needs the runs to write it in the release's namespace, or it expires there 12 hours after the
bootstrap wrote it. Said where the values show it: literal names, or a literal exclusion. */}}
{{- $ns := .Release.Namespace }}
{{- if has .Values.secretName (include "ecr-refresh.imagePullSecretNames" . | splitList ",") }}
{{- $literal := true }}
{{- range .Values.namespaces }}
{{- if or (eq . "all") (contains "*" .) (contains "?" .) (contains "," .) }}
{{- $literal = false }}
{{- end }}
{{- end }}
{{- if and $literal (not (has $ns .Values.namespaces)) }}
{{- fail (printf "imagePullSecrets lists %s, the pull Secret, but namespaces does not select the release's namespace %s: no run would write the Secret there, and ecr-refresh's own pod could not pull once the bootstrap's token expired; add %s to namespaces (docs: Self-hosting from ECR)" .Values.secretName $ns $ns) }}
{{- end }}
{{- if has $ns .Values.excludeNamespaces }}
{{- fail (printf "imagePullSecrets lists %s, the pull Secret, but excludeNamespaces takes the release's namespace %s out: no run would write the Secret there, and ecr-refresh's own pod could not pull once the bootstrap's token expired (docs: Self-hosting from ECR)" .Values.secretName $ns) }}
{{- end }}
{{- end }}
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

{{- /* The release's own series in the Pushgateway: an `install` label (its namespace and full
name) before the operator's labels, so that two releases never replace each other's group and
the PrometheusRule's alerts match their own release only. Not `release`: kube-prometheus-stack
selects PrometheusRules by that label. Only with a gateway: the binary refuses labels without one. */}}
{{- define "ecr-refresh.installLabel" -}}
{{ .Release.Namespace }}/{{ include "ecr-refresh.fullname" . }}
{{- end }}

{{/* name=value,… in key order, for ECR_REFRESH_PUSHGATEWAY_LABELS. */}}
{{- define "ecr-refresh.groupingLabels" -}}
{{- $pairs := list }}
{{- if and .Values.pushgateway.url (not (hasKey .Values.pushgateway.groupingLabels "install")) }}
{{- $pairs = append $pairs (printf "install=%s" (include "ecr-refresh.installLabel" .)) }}
{{- end }}
{{- range $k, $v := .Values.pushgateway.groupingLabels }}
{{- $pairs = append $pairs (printf "%s=%s" $k $v) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}

{{/*
The spec of the Job each run is: the CronJob's jobTemplate.spec and the first-run hook's
spec. Its comments say why each field is what it is; they are rendered, so the kustomize
manifests rendered from this chart (.ci/render-manifests) carry them too.
*/}}
{{- define "ecr-refresh.jobSpec" -}}
# One more try for a failed run (exit 1 or 3); the next run comes 10 minutes later
# anyway. A configuration error (exit 2) fails the Job at once, since a retry can't
# fix it.
backoffLimit: {{ .Values.backoffLimit | int64 }}
# Backstop for the whole Job, both tries: over, with the pod's 30 s to stop, before the
# next run starts. Each try stops itself at ECR_REFRESH_TIMEOUT (3m) and reports what it
# left undone; then it may take 20 s for writes in flight, 5 s for the summary Event
# and 5 s for the metrics push. Two tries: 2 x (180 + 20 + 5 + 5) + 10 s backoff =
# 430 s, leaving 110 s for two pods to be scheduled, pull the image and start.
# tests/fake/manifests.rs checks this sum: raise the timeout only with this deadline.
{{- /* A null value is Helm's "unset": the field is left out (Kubernetes' own default),
never rendered as 0, which would fail every Job at once. */}}
{{- if not (kindIs "invalid" .Values.activeDeadlineSeconds) }}
activeDeadlineSeconds: {{ .Values.activeDeadlineSeconds | int64 }}
{{- end }}
# A finished Job the limits above still keep goes after a day, with its pod and logs.
{{- if not (kindIs "invalid" .Values.ttlSecondsAfterFinished) }}
ttlSecondsAfterFinished: {{ .Values.ttlSecondsAfterFinished | int64 }}
{{- end }}
podFailurePolicy:
  rules:
    - action: FailJob
      onExitCodes:
        containerName: ecr-refresh
        operator: In
        values: [2]
    # An evicted or preempted pod is not the run's fault: don't count it.
    - action: Ignore
      onPodConditions:
        - type: DisruptionTarget
          status: "True"
template:
  metadata:
    labels:
      {{- include "ecr-refresh.componentLabels" (list . "run") | nindent 6 }}
      {{- with .Values.podLabels }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    {{- with .Values.podAnnotations }}
    annotations:
      {{- toYaml . | nindent 6 }}
    {{- end }}
  spec:
    # Never: each try is a new pod, so a failed one keeps its logs and its
    # termination message for `kubectl describe`; podFailurePolicy requires it.
    restartPolicy: Never
    # On SIGTERM (a drain, or the Job's deadline) a run gives writes in flight 20 s,
    # then prints its summary and exits: well inside this grace.
    terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds | int64 }}
    serviceAccountName: {{ include "ecr-refresh.podServiceAccountName" . }}
    # ecr-refresh talks to the API server as this ServiceAccount.
    automountServiceAccountToken: true
    {{- with include "ecr-refresh.imagePullSecrets" . }}
    imagePullSecrets:
      {{- . | nindent 6 }}
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
    # Non-root; fsGroup lets the user read a projected IRSA / Pod Identity token.
    securityContext:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- $webIdentity := .Values.aws.webIdentity }}
    {{- $rolesAnywhere := .Values.aws.rolesAnywhere }}
    {{- if or $webIdentity.roleArn $rolesAnywhere.trustAnchorArn .Values.extraVolumes }}
    volumes:
      {{- if $webIdentity.roleArn }}
      # The ServiceAccount's own token for STS (aws.webIdentity), renewed by the kubelet.
      - name: aws-web-identity-token
        projected:
          sources:
            - serviceAccountToken:
                audience: {{ $webIdentity.audience | quote }}
                expirationSeconds: {{ $webIdentity.expirationSeconds | int64 }}
                path: token
      {{- end }}
      {{- if $rolesAnywhere.trustAnchorArn }}
      # The Roles Anywhere certificate and key (aws.rolesAnywhere.certificateSecret), only
      # those two keys: the CA (ca.crt) stays out, the trust anchor holds it.
      - name: aws-roles-anywhere
        secret:
          secretName: {{ required "aws.rolesAnywhere.certificateSecret: the Secret with tls.crt and tls.key (a cert-manager Certificate's) is needed with trustAnchorArn" $rolesAnywhere.certificateSecret | quote }}
          items:
            - key: tls.crt
              path: tls.crt
            - key: tls.key
              path: tls.key
      {{- end }}
      {{- with .Values.extraVolumes }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    {{- end }}
    {{- with .Values.initContainers }}
    initContainers:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    containers:
      - name: ecr-refresh
        image: {{ include "ecr-refresh.image" . }}
        imagePullPolicy: {{ .Values.image.pullPolicy }}
        {{- with .Values.aws.existingSecret }}
        # Static AWS keys (aws.existingSecret), a last resort outside EKS.
        envFrom:
          - secretRef:
              name: {{ . }}
        {{- else }}
        # Static AWS keys instead of IRSA or Pod Identity (see the ServiceAccount's comment):
        # envFrom:
        #   - secretRef:
        #       name: ecr-refresh-aws
        {{- end }}
        env:
          {{- include "ecr-refresh.ownEnv" . }}
          {{- include "ecr-refresh.noDuplicateEnv" . }}
          {{- with .Values.extraEnv }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
          # RUST_LOG (a tracing filter) is left unset: ecr-refresh logs at info, its
          # libraries at warn. Set it to "debug" to log every API request.
        {{- if or $webIdentity.roleArn $rolesAnywhere.trustAnchorArn .Values.extraVolumeMounts }}
        volumeMounts:
          {{- if $webIdentity.roleArn }}
          - name: aws-web-identity-token
            mountPath: /var/run/secrets/ecr-refresh/aws
            readOnly: true
          {{- end }}
          {{- if $rolesAnywhere.trustAnchorArn }}
          - name: aws-roles-anywhere
            mountPath: /var/run/secrets/ecr-refresh/roles-anywhere
            readOnly: true
          {{- end }}
          {{- with .Values.extraVolumeMounts }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
        {{- end }}
        terminationMessagePath: /dev/termination-log
        # The summary if the run wrote one, else the end of its log.
        terminationMessagePolicy: FallbackToLogsOnError
        {{- with (include "ecr-refresh.resources" . | fromYaml) }}
        resources:
          {{- toYaml . | nindent 10 }}
        {{- end }}
        {{- with .Values.securityContext }}
        securityContext:
          {{- toYaml . | nindent 10 }}
        {{- end }}
      {{- with .Values.sidecars }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
{{- end }}

{{/*
The rules every Role and the ClusterRole share, on the Secret and Events; the ClusterRole
adds namespaces: list. Rule 0's name follows secretName.
*/}}
{{- define "ecr-refresh.secretRules" -}}
# Read the Secret's uid and apply the fresh token: this Secret only, no other.
{{- if eq .Values.scope "cluster" }}
# list: every namespace's Secret of this name in one list, field-selected by
# metadata.name=<name>, which RBAC takes as the resource name; a list without that
# selector, or for another name, is refused.
{{- end }}
# Rule 0: the name follows the Secret's (secretName; in the kustomize manifests the policy
# component copies it from ECR_REFRESH_SECRET_NAME).
- apiGroups: [""]
  resources: ["secrets"]
  resourceNames: [{{ .Values.secretName | quote }}]
  verbs: {{ if eq .Values.scope "cluster" }}["get", "list", "patch"]{{ else }}["get", "patch"]{{ end }}
# Create the Secret where it is missing. A create can't be narrowed to one name:
# authorization runs before the object exists. The admission policy does it.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["create"]
{{- end }}

{{- define "ecr-refresh.eventRules" -}}
# Warning Events for namespaces that failed, where their owners look (ECR_REFRESH_EVENTS).
# Best effort: without this a run still works, and logs one warning.
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create"]
{{- end }}

{{/*
What `ecr-refresh check` reads, read-only: its Secret by name; with check.podRights
(manifests/components/check) pods, for the images they pull and whether they are stuck
pulling, and ServiceAccounts, for their imagePullSecrets.
*/}}
{{- define "ecr-refresh.checkRules" -}}
# Read the Secret, by name only{{ if eq .Values.scope "cluster" }} (list: every namespace's in one
# list field-selected by its name){{ end }}: a check writes nothing.
- apiGroups: [""]
  resources: ["secrets"]
  resourceNames: [{{ .Values.secretName | quote }}]
  verbs: {{ if eq .Values.scope "cluster" }}["get", "list"]{{ else }}["get"]{{ end }}
{{- if .Values.check.podRights }}
# The pods, for the images they pull and whether they are stuck pulling.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list"]
# Their ServiceAccounts, for imagePullSecrets.
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get"]
{{- end }}
{{- end }}

{{/* get and patch on the ServiceAccounts named in serviceAccounts, and on no other; with
scope cluster list too, each name's in one list field-selected by that name. */}}
{{- define "ecr-refresh.serviceAccountRules" -}}
{{- with .Values.serviceAccounts }}
- apiGroups: [""]
  resources: ["serviceaccounts"]
  resourceNames: {{ toJson . }}
  verbs: {{ if eq $.Values.scope "cluster" }}["get", "list", "patch"]{{ else }}["get", "patch"]{{ end }}
{{- end }}
{{- end }}

{{- /* The variables the chart sets itself, from its values: the container's env, before
extraEnv. A template of its own, so that extraEnv can be checked against its names. */}}
{{- define "ecr-refresh.ownEnv" -}}
{{- $webIdentity := .Values.aws.webIdentity }}
{{- $rolesAnywhere := .Values.aws.rolesAnywhere }}
{{- $clusters := .Values.clusters }}
          {{- if .Values.aws.region }}
          # The region GetAuthorizationToken is called in; also the default registry's.
          - name: AWS_REGION
            value: {{ .Values.aws.region | quote }}
          {{- end }}
          # refresh; or check, which writes nothing and reports per namespace what keeps
          # its pods from pulling (docs/src/troubleshooting.md; rights: check.podRights, or
          # the kustomize component components/check).
          - name: ECR_REFRESH_MODE
            value: {{ .Values.mode | quote }}
          # The Secret's name in every namespace; the RBAC's resourceNames and the
          # admission policy follow it.
          {{- /* toYaml, not quote: plain where YAML allows, as kustomize users (and the
          tests) find and edit it in manifests/base/cronjob.yaml. */}}
          - name: ECR_REFRESH_SECRET_NAME
            value: {{ .Values.secretName | toYaml }}
          # Comma-separated namespace names and globs (* and ?); "all" is every namespace.
          - name: ECR_REFRESH_NAMESPACES
            value: {{ join "," .Values.namespaces | quote }}
          # Comma-separated globs taken out of the selection; empty: kube-public and
          # kube-node-lease, where no pod pulls.
          - name: ECR_REFRESH_EXCLUDE_NAMESPACES
            value: {{ join "," .Values.excludeNamespaces | quote }}
          # Label selector for namespaces, evaluated by the API server; empty selects all.
          - name: ECR_REFRESH_NAMESPACE_SELECTOR
            value: {{ .Values.namespaceSelector | quote }}
          # Comma-separated ECR hosts (<account>.dkr.ecr.<region>.amazonaws.com, public.ecr.aws); empty is the caller's own.
          - name: ECR_REFRESH_REGISTRIES
            value: {{ join "," .Values.registries | quote }}
          # "true": also write each registry's dual-stack host (<account>.dkr-ecr.<region>.on.aws), same token.
          - name: ECR_REFRESH_DUAL_STACK
            value: {{ .Values.dualStack | toString | quote }}
          # "true": the API server validates every write (dryRun=All) and stores nothing.
          - name: ECR_REFRESH_DRY_RUN
            value: {{ .Values.dryRun | toString | quote }}
          # How many namespaces are written at once.
          - name: ECR_REFRESH_CONCURRENCY
            {{- /* null (Helm's "unset"): empty, which ecr-refresh reads as its default. */}}
            value: {{ if kindIs "invalid" .Values.concurrency }}""{{ else }}{{ .Values.concurrency | int64 | toString | quote }}{{ end }}
          # Deadline for the whole run; two tries must fit in activeDeadlineSeconds (above).
          - name: ECR_REFRESH_TIMEOUT
            value: {{ .Values.timeout | quote }}
          # "text" or "json".
          - name: ECR_REFRESH_LOG_FORMAT
            value: {{ .Values.logFormat | quote }}
          # Comma-separated ServiceAccounts (usually "default") that get the Secret in imagePullSecrets.
          - name: ECR_REFRESH_SERVICE_ACCOUNTS
            value: {{ join "," .Values.serviceAccounts | quote }}
          # "true": try each token against its registry before writing; refused means exit 3.
          - name: ECR_REFRESH_VERIFY_LOGIN
            value: {{ .Values.verifyLogin | toString | quote }}
          # Rewrite a Secret once its token has less than this left; 12h or more rewrites all on every run.
          - name: ECR_REFRESH_RENEW_BEFORE
            value: {{ .Values.renewBefore | quote }}
          # Where the run's summary goes, for `kubectl describe pod`.
          - name: ECR_REFRESH_TERMINATION_LOG
            value: /dev/termination-log
          # Prometheus Pushgateway base URL for the run's metrics; empty pushes nothing.
          - name: ECR_REFRESH_PUSHGATEWAY_URL
            value: {{ .Values.pushgateway.url | quote }}
          # Grouping labels for the push, comma-separated name=value (cluster=prod-eu).
          - name: ECR_REFRESH_PUSHGATEWAY_LABELS
            value: {{ include "ecr-refresh.groupingLabels" . | quote }}
          # "true": a Warning Event in each namespace that failed, regarding its Secret
          # (at most 100 a run, then one in this namespace that counts the rest).
          - name: ECR_REFRESH_EVENTS
            value: {{ .Values.events | toString | quote }}
          # An IAM role assumed (STS AssumeRole) over the base credentials; empty assumes none.
          - name: ECR_REFRESH_ASSUME_ROLE_ARN
            value: {{ .Values.aws.assumeRole.roleArn | quote }}
          # The external id the role's trust policy requires (sts:ExternalId); only with a role.
          - name: ECR_REFRESH_ASSUME_ROLE_EXTERNAL_ID
            value: {{ .Values.aws.assumeRole.externalId | quote }}
          # The assumed role's session name, as CloudTrail records it.
          - name: ECR_REFRESH_ASSUME_ROLE_SESSION_NAME
            value: {{ .Values.aws.assumeRole.sessionName | quote }}
          # This install's name on the Secrets it writes; empty is the ServiceAccount it
          # runs as (<namespace>/<name>). A Secret another install wrote for registries
          # this one does not write is refused: give each install its own Secret name.
          - name: ECR_REFRESH_INSTALL
            value: {{ .Values.install | quote }}
          # Argo CD's namespace: a repo-creds and a repository Secret per private registry
          # there; empty: none.
          - name: ECR_REFRESH_ARGOCD_NAMESPACE
            value: {{ .Values.argocd.namespace | quote }}
          # helm or oci: how Argo CD reads the registry; only with ECR_REFRESH_ARGOCD_NAMESPACE.
          - name: ECR_REFRESH_ARGOCD_TYPE
            value: {{ if .Values.argocd.namespace }}{{ .Values.argocd.type | quote }}{{ else }}""{{ end }}
          # "true": at the end of a run, evict pods stuck in ImagePullBackOff for want of the
          # Secret, so that their controllers recreate them with it (rights: evictStuckPods,
          # or the kustomize component components/evict-stuck-pods).
          - name: ECR_REFRESH_EVICT_STUCK_PODS
            value: {{ .Values.evictStuckPods.enabled | toString | quote }}
          # The most pods one run evicts; the rest wait for the next run.
          - name: ECR_REFRESH_EVICT_LIMIT
            value: {{ .Values.evictStuckPods.limit | int64 | toString | quote }}
          # IAM Roles Anywhere (aws.rolesAnywhere): with a trust anchor, the certificate of
          # certificateSecret (mounted below, read-only, read at each run) is exchanged for
          # the role's credentials; empty: off.
          - name: ECR_REFRESH_ROLES_ANYWHERE_TRUST_ANCHOR_ARN
            value: {{ $rolesAnywhere.trustAnchorArn | quote }}
          - name: ECR_REFRESH_ROLES_ANYWHERE_PROFILE_ARN
            value: {{ $rolesAnywhere.profileArn | quote }}
          - name: ECR_REFRESH_ROLES_ANYWHERE_ROLE_ARN
            value: {{ $rolesAnywhere.roleArn | quote }}
          # The certificate, then its intermediates (tls.crt), and its key (tls.key).
          - name: ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE
            value: {{ if $rolesAnywhere.trustAnchorArn }}/var/run/secrets/ecr-refresh/roles-anywhere/tls.crt{{ else }}""{{ end }}
          - name: ECR_REFRESH_ROLES_ANYWHERE_PRIVATE_KEY
            value: {{ if $rolesAnywhere.trustAnchorArn }}/var/run/secrets/ecr-refresh/roles-anywhere/tls.key{{ else }}""{{ end }}
          # More intermediates, a PEM file (with extraVolumes); tls.crt's are sent already.
          - name: ECR_REFRESH_ROLES_ANYWHERE_CHAIN
            value: ""
          # How long the session's credentials live (CreateSession's durationSeconds).
          - name: ECR_REFRESH_ROLES_ANYWHERE_SESSION_DURATION
            value: {{ if $rolesAnywhere.trustAnchorArn }}{{ $rolesAnywhere.sessionDuration | quote }}{{ else }}""{{ end }}
          # The Argo CD project the repository Secrets are for; empty: every project. Only
          # with ECR_REFRESH_ARGOCD_NAMESPACE.
          - name: ECR_REFRESH_ARGOCD_PROJECT
            value: {{ if .Values.argocd.namespace }}{{ .Values.argocd.project | quote }}{{ else }}""{{ end }}
          # A fleet from one run (clusters.source): capi, argocd or dir:<path>; empty: only
          # the cluster it runs in. Each spoke is written as its own ServiceAccount.
          - name: ECR_REFRESH_CLUSTERS
            value: {{ $clusters.source | quote }}
          # Comma-separated namespaces holding the cluster Secrets (capi, argocd).
          - name: ECR_REFRESH_CLUSTERS_NAMESPACE
            value: {{ include "ecr-refresh.clustersNamespaces" . | fromJsonArray | join "," | quote }}
          # A label selector on the cluster Secrets; empty: every one.
          - name: ECR_REFRESH_CLUSTERS_SELECTOR
            value: {{ if $clusters.source }}{{ $clusters.selector | quote }}{{ else }}""{{ end }}
          # How many clusters are worked on at once.
          - name: ECR_REFRESH_CLUSTERS_CONCURRENCY
            value: {{ if and $clusters.source (not (kindIs "invalid" $clusters.concurrency)) }}{{ $clusters.concurrency | int64 | toString | quote }}{{ else }}""{{ end }}
          # "true": the cluster it runs in is a target too (named local).
          - name: ECR_REFRESH_CLUSTERS_INCLUDE_LOCAL
            value: {{ if $clusters.source }}{{ $clusters.includeLocal | toString | quote }}{{ else }}""{{ end }}
          # The spoke ServiceAccount (<namespace>/<name>) every write in a spoke is made as;
          # empty: ecr-refresh/ecr-refresh, the spoke install's.
          - name: ECR_REFRESH_CLUSTERS_SERVICE_ACCOUNT
            value: {{ if $clusters.source }}{{ $clusters.serviceAccount | quote }}{{ else }}""{{ end }}
          # The spoke ServiceAccount a check acts as; empty: ecr-refresh/ecr-refresh-check.
          - name: ECR_REFRESH_CLUSTERS_CHECK_SERVICE_ACCOUNT
            value: {{ if $clusters.source }}{{ $clusters.checkServiceAccount | quote }}{{ else }}""{{ end }}
          # token-request (a 10-minute token for that ServiceAccount) or impersonate.
          - name: ECR_REFRESH_CLUSTERS_AUTH
            value: {{ if $clusters.source }}{{ $clusters.auth | quote }}{{ else }}""{{ end }}
          {{- if $webIdentity.roleArn }}
          # Web identity (aws.webIdentity): the AWS SDK exchanges the projected token.
          - name: AWS_ROLE_ARN
            value: {{ $webIdentity.roleArn | quote }}
          - name: AWS_WEB_IDENTITY_TOKEN_FILE
            value: /var/run/secrets/ecr-refresh/aws/token
          - name: AWS_ROLE_SESSION_NAME
            value: ecr-refresh
          {{- end }}
{{- end }}

{{- /* The container's resources: a hub run (clusters.source) holds every spoke's work in
one process, so the chart's default memory limit, 64Mi, is raised to 128Mi there; a limit of
your own is kept. */}}
{{- define "ecr-refresh.resources" -}}
{{- $resources := deepCopy (.Values.resources | default dict) }}
{{- if and .Values.clusters.source (eq (toString (dig "limits" "memory" "" $resources)) "64Mi") }}
{{- $_ := set $resources.limits "memory" "128Mi" }}
{{- end }}
{{- with $resources }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{- /* The namespaces holding the hub's cluster Secrets: clusters.namespaces, or for argocd
Argo CD's own namespace, argocd; none for dir: (files) or with no clusters.source. */}}
{{- define "ecr-refresh.clustersNamespaces" -}}
{{- $c := .Values.clusters }}
{{- if and (eq $c.source "argocd") (not $c.namespaces) }}
{{- toJson (list "argocd") }}
{{- else if or (eq $c.source "capi") (eq $c.source "argocd") }}
{{- toJson $c.namespaces }}
{{- else }}
{{- toJson list }}
{{- end }}
{{- end }}

{{- /* What a release can't be, said with what to do: a spoke runs nothing; a hub's source
needs the namespaces its Secrets are in. */}}
{{- define "ecr-refresh.checkFleet" -}}
{{- $c := .Values.clusters }}
{{- if .Values.spoke.enabled }}
{{- if $c.source }}
{{- fail (printf "spoke.enabled and clusters.source %q: a spoke install runs nothing (no CronJob), so it reads no clusters; install the hub as a release of its own, without spoke.enabled" $c.source) }}
{{- end }}
{{- if eq .Values.mode "check" }}
{{- fail "spoke.enabled renders no CronJob, so mode check would run nothing: the hub's check acts as the spoke's check ServiceAccount (check.podRights=true renders it); leave mode at refresh" }}
{{- end }}
{{- if .Values.monitoring.prometheusRule.enabled }}
{{- fail "spoke.enabled renders no CronJob, so the PrometheusRule would watch runs that never happen: the hub's release carries the alerts, per cluster; set monitoring.prometheusRule.enabled=false" }}
{{- end }}
{{- if and (not .Values.spoke.hub.serviceAccount.create) (not .Values.spoke.hub.subjects) }}
{{- fail "spoke.hub.serviceAccount.create is false and spoke.hub.subjects is empty: nobody would hold the hub's right; set spoke.hub.serviceAccount.create=true, or name the hub's identity in spoke.hub.subjects" }}
{{- end }}
{{- end }}
{{- if and (eq $c.source "capi") (not $c.namespaces) }}
{{- fail "clusters.source capi needs clusters.namespaces: the namespaces holding the Cluster API <cluster>-kubeconfig Secrets, where the hub is granted get and list on Secrets (and nowhere else)" }}
{{- end }}
{{- if and (hasPrefix "dir:" $c.source) $c.namespaces }}
{{- fail "clusters.namespaces is for capi and argocd: with dir: the kubeconfigs are files (mount them with extraVolumes and extraVolumeMounts); leave clusters.namespaces empty" }}
{{- end }}
{{- end }}

{{- /* extraEnv may not name a variable the chart sets: the container would get both entries,
and Helm's upgrade patch, which keys env by name, would keep the old value (and fail once the
entry is removed). */}}
{{- define "ecr-refresh.noDuplicateEnv" -}}
{{- $own := dict }}
{{- range (include "ecr-refresh.ownEnv" . | fromYamlArray) }}
{{- $_ := set $own .name true }}
{{- end }}
{{- range .Values.extraEnv }}
{{- if hasKey $own .name }}
{{- fail (printf "extraEnv sets %s, which the chart sets itself from its values: set that value instead (values.yaml names the variable beside it), and take %s out of extraEnv" .name .name) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The Argo CD Secrets (argocd.namespace), as JSON: each name to its kind (Argo CD's secret-type
label) and url, two for every private registry in `registries` (ECR Public gets none), as
ecr-refresh names and writes them (src/argocd/mod.rs): the repo-creds Secret
<secretName>-<account>-<region>, url <host>/ (Argo CD matches repo-creds by prefix, so the
url ends at a delimiter: <host>.attacker.example does not start with it), and the repository
Secret <that name>-repository, url <host> (matched exactly). oci://<host>/ and oci://<host>
with argocd.type oci. Fails when none is private: ecr-refresh would refuse the configuration
(exit 2).
*/}}
{{- define "ecr-refresh.argocdSecrets" -}}
{{- $secrets := dict -}}
{{- $prefix := ternary "oci://" "" (eq .Values.argocd.type "oci") -}}
{{- range .Values.registries -}}
{{- if regexMatch "^[0-9]{12}\\.dkr[.-]ecr(-fips)?\\.[a-z0-9-]+\\." . -}}
{{- $name := printf "%s-%s" $.Values.secretName (regexReplaceAll "^([0-9]{12})\\.dkr[.-]ecr(-fips)?\\.([a-z0-9-]+)\\..*$" . "${1}-${3}") -}}
{{- $_ := set $secrets $name (dict "kind" "repo-creds" "url" (printf "%s%s/" $prefix .)) -}}
{{- $_ := set $secrets (printf "%s-repository" $name) (dict "kind" "repository" "url" (printf "%s%s" $prefix .)) -}}
{{- end -}}
{{- end -}}
{{- if not $secrets -}}
{{- fail "argocd.namespace needs the private registries listed in registries (<account>.dkr.ecr.<region>.amazonaws.com): the Argo CD Secrets are named after each one's account and region" -}}
{{- end -}}
{{- toJson $secrets -}}
{{- end }}

{{/*
What ECR_REFRESH_EVICT_STUCK_PODS uses: the unfinished pods of a namespace (list, get) and
the Eviction API (create on pods/eviction). Nothing else of pods: no create, update, patch
or delete.
*/}}
{{- define "ecr-refresh.evictRules" -}}
# Find the pods stuck in ImagePullBackOff.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "get"]
# Evict them through the Eviction API, so that PodDisruptionBudgets hold.
- apiGroups: [""]
  resources: ["pods/eviction"]
  verbs: ["create"]
# Read a stuck pod's ServiceAccount: only a pod with no imagePullSecrets of its own, whose
# ServiceAccount now lists the Secret, is evicted (a pod listing it recovers by itself).
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get"]
{{- end }}
