{{/*
Names, labels and the decisions every template shares (which features are on, which
RBAC rules follow from them). Templates ask these helpers instead of re-deriving.
*/}}

{{- define "gitops-reloader.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gitops-reloader.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gitops-reloader.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gitops-reloader.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gitops-reloader.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- with .Values.reloader.matchLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "gitops-reloader.labels" -}}
helm.sh/chart: {{ include "gitops-reloader.chart" . }}
{{ include "gitops-reloader.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "gitops-reloader.serviceAccountName" -}}
{{- if .Values.reloader.serviceAccount.create }}
{{- default (include "gitops-reloader.fullname" .) .Values.reloader.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.reloader.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "gitops-reloader.image" -}}
{{- $image := .Values.reloader.deployment.image }}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag | toString) }}
{{- end }}
{{- end }}

{{/* "true" when at least one git repository is configured (git / pull-request sinks). */}}
{{- define "gitops-reloader.gitEnabled" -}}
{{- if .Values.reloader.git.repositories }}true{{ end }}
{{- end }}

{{- define "gitops-reloader.stateStoreEnabled" -}}
{{- if eq (.Values.reloader.stateStore | default "none") "configmap" }}true{{ end }}
{{- end }}

{{- define "gitops-reloader.stateStoreName" -}}
{{- /* Short enough for the controller's -shard-<index> suffix and the shard index. */}}
{{- printf "%s-state" (include "gitops-reloader.fullname" . | trunc 40 | trimSuffix "-") }}
{{- end }}

{{- define "gitops-reloader.digestKeySecret" -}}
{{- default (printf "%s-digest-key" (include "gitops-reloader.fullname" .)) .Values.reloader.digestKeySecret }}
{{- end }}

{{- define "gitops-reloader.leaseName" -}}
{{- include "gitops-reloader.fullname" . }}
{{- end }}

{{/*
The controller Deployments, as a YAML list: one per reloader.shards entry, or one
unnamed entry (today's single Deployment) when the list is empty. Each entry:
  name        the shard's name ("" without shards)
  deployment  the Deployment's name
  args        the shard's own flags (--namespace-selector / --shard-*), after the shared ones
  lease       the Lease the controller elects on (the controller adds -shard-<I> itself)
  stateStore  --state-store-name: label shards get their own (hash shards: the controller
              adds -shard-<I> itself)
  leaseHeld   the Lease name as it exists in the cluster (RBAC resourceNames)
  replicas, resources, extraArgs
Label shards (every entry has namespaceSelector) combine it with reloader.namespaceSelector;
hash shards (no entry has one) get --shard-index=<position> --shard-count=<entries>.
*/}}
{{- define "gitops-reloader.shards" -}}
{{- $root := . }}
{{- $r := .Values.reloader }}
{{- $d := $r.deployment }}
{{- $fullname := include "gitops-reloader.fullname" . }}
{{- $lease := include "gitops-reloader.leaseName" . }}
{{- $out := list }}
{{- if not $r.shards }}
{{- $args := list }}
{{- with $r.namespaceSelector }}{{ $args = append $args (printf "--namespace-selector=%s" .) }}{{ end }}
{{- $out = append $out (dict "name" "" "deployment" $fullname "args" $args "lease" $lease "leaseHeld" $lease "stateStore" (include "gitops-reloader.stateStoreName" $root) "replicas" $d.replicas "resources" $d.resources "extraArgs" list) }}
{{- else }}
{{- if not $r.watchGlobally }}
{{- fail "reloader.shards needs reloader.watchGlobally=true (a namespaced install watches only its own namespace)" }}
{{- end }}
{{- $labelled := 0 }}
{{- range $r.shards }}{{ if .namespaceSelector }}{{ $labelled = add1 $labelled }}{{ end }}{{ end }}
{{- if and $labelled (ne (int $labelled) (len $r.shards)) }}
{{- fail "reloader.shards: give every shard a namespaceSelector (label sharding) or none (hash sharding), not some" }}
{{- end }}
{{- $seen := dict }}
{{- range $i, $s := $r.shards }}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,14}[a-z0-9])?$" (toString $s.name)) }}
{{- fail (printf "reloader.shards[%d].name %q: use lower-case letters, digits and '-' (at most 16 characters)" $i (toString $s.name)) }}
{{- end }}
{{- if hasKey $seen $s.name }}
{{- fail (printf "reloader.shards: name %q is used twice" $s.name) }}
{{- end }}
{{- $_ := set $seen $s.name true }}
{{- $name := printf "%s-%s" ($fullname | trunc (int (sub 62 (len $s.name))) | trimSuffix "-") $s.name }}
{{- $args := list }}
{{- $shardLease := $lease }}
{{- $held := printf "%s-shard-%d" $lease $i }}
{{- $stateStore := include "gitops-reloader.stateStoreName" $root }}
{{- if $labelled }}
{{- $selector := join "," (compact (list ($r.namespaceSelector | default "") $s.namespaceSelector)) }}
{{- $args = append $args (printf "--namespace-selector=%s" $selector) }}
{{- $shardLease = printf "%s-%s" $lease $s.name }}
{{- $held = $shardLease }}
{{- /* Each label shard leads alone: its own state store, as its own Lease. */}}
{{- $stateStore = printf "%s-%s" ($stateStore | trunc (int (sub 57 (len $s.name))) | trimSuffix "-") $s.name }}
{{- else }}
{{- with $r.namespaceSelector }}{{ $args = append $args (printf "--namespace-selector=%s" .) }}{{ end }}
{{- $args = append $args (printf "--shard-count=%d" (len $r.shards)) }}
{{- $args = append $args (printf "--shard-index=%d" $i) }}
{{- end }}
{{- $replicas := $d.replicas }}
{{- if hasKey $s "replicas" }}{{ $replicas = $s.replicas }}{{ end }}
{{- $out = append $out (dict "name" $s.name "deployment" $name "args" $args "lease" $shardLease "leaseHeld" $held "stateStore" $stateStore "replicas" $replicas "resources" ($s.resources | default $d.resources) "extraArgs" ($s.extraArgs | default list)) }}
{{- end }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{- define "gitops-reloader.gitConfigDir" -}}/etc/gitops-reloader{{- end }}

{{/*
The reload strategy passed as --reload-strategy: defaultSink (env-vars|annotations)
wins over reloadStrategy; "" or "default" means the flag is not passed.
*/}}
{{- define "gitops-reloader.reloadStrategy" -}}
{{- $sink := .Values.reloader.defaultSink | default "" }}
{{- if has $sink (list "env-vars" "annotations") }}
{{- $sink }}
{{- else if not (has (.Values.reloader.reloadStrategy | default "default") (list "default" "")) }}
{{- .Values.reloader.reloadStrategy }}
{{- end }}
{{- end }}

{{/* Fail early, with a message naming the value, on combinations the controller rejects. */}}
{{- define "gitops-reloader.validate" -}}
{{- $r := .Values.reloader }}
{{- if not (has ($r.reloadStrategy | default "default") (list "default" "env-vars" "annotations")) }}
{{- fail (printf "reloader.reloadStrategy must be default, env-vars or annotations, got %q" $r.reloadStrategy) }}
{{- end }}
{{- $sink := $r.defaultSink | default "" }}
{{- if and (has $sink (list "git" "pull-request")) (not $r.git.repositories) }}
{{- fail (printf "reloader.defaultSink=%s needs reloader.git.repositories" $sink) }}
{{- else if and (eq $sink "webhook") (not $r.webhookUrl) }}
{{- fail "reloader.defaultSink=webhook needs reloader.webhookUrl" }}
{{- else if not (has $sink (list "" "env-vars" "annotations" "webhook")) }}
{{- fail (printf "reloader.defaultSink must be empty, env-vars, annotations, webhook, git or pull-request, got %q" $sink) }}
{{- end }}
{{- if and $r.ignoreSecrets $r.ignoreConfigMaps }}
{{- fail "reloader.ignoreSecrets and reloader.ignoreConfigMaps are both true: nothing would be watched" }}
{{- end }}
{{- if and $r.namespaces $r.watchGlobally }}
{{- fail "reloader.namespaces is set but reloader.watchGlobally is true; set reloader.watchGlobally=false to watch only those namespaces" }}
{{- end }}
{{- if and $r.namespaceSelector (not $r.watchGlobally) }}
{{- fail "reloader.namespaceSelector needs reloader.watchGlobally=true (a namespaced install watches only its own namespace)" }}
{{- end }}
{{- if and $r.logFormat (not (has $r.logFormat (list "text" "json"))) }}
{{- fail (printf "reloader.logFormat must be text or json, got %q" $r.logFormat) }}
{{- end }}
{{- if and $r.logLevel (not (has $r.logLevel (list "debug" "info" "warning" "error"))) }}
{{- fail (printf "reloader.logLevel must be debug, info, warning or error, got %q" $r.logLevel) }}
{{- end }}
{{- if not (has $r.git.prGrouping (list "workload" "repository")) }}
{{- fail (printf "reloader.git.prGrouping must be workload or repository, got %q" $r.git.prGrouping) }}
{{- end }}
{{- $seen := dict }}
{{- range $i, $repo := $r.git.repositories }}
{{- if not $repo.name }}
{{- fail (printf "reloader.git.repositories[%d]: name is required" $i) }}
{{- end }}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,56}[a-z0-9])?$" $repo.name) }}
{{- fail (printf "reloader.git.repositories[%d].name %q: use lower-case letters, digits and '-' (at most 58 characters)" $i $repo.name) }}
{{- end }}
{{- if hasKey $seen $repo.name }}
{{- fail (printf "reloader.git.repositories: name %q is used twice" $repo.name) }}
{{- end }}
{{- $_ := set $seen $repo.name true }}
{{- if not $repo.url }}
{{- fail (printf "reloader.git.repositories[%d] (%s): url is required" $i $repo.name) }}
{{- end }}
{{- if and $repo.githubAppSecret (not (and $repo.githubApp $repo.githubApp.appId)) }}
{{- fail (printf "reloader.git.repositories[%d] (%s): githubAppSecret needs githubApp.appId" $i $repo.name) }}
{{- end }}
{{- if and $repo.githubAppSecret (eq (include "gitops-reloader.credentialsType" $repo) "token") $repo.credentialsSecret }}
{{- fail (printf "reloader.git.repositories[%d] (%s): give credentialsSecret (token) or githubAppSecret, not both" $i $repo.name) }}
{{- end }}
{{- if and $repo.signingKeyFormat (not (has $repo.signingKeyFormat (list "ssh" "openpgp"))) }}
{{- fail (printf "reloader.git.repositories[%d] (%s): signingKeyFormat must be ssh or openpgp" $i $repo.name) }}
{{- end }}
{{- if and $repo.credentialsType (not (has $repo.credentialsType (list "token" "ssh"))) }}
{{- fail (printf "reloader.git.repositories[%d] (%s): credentialsType must be token or ssh" $i $repo.name) }}
{{- end }}
{{- with $repo.pullRequest }}
{{- if and .host (not (has .host (list "github" "gitlab" "gitea" "bitbucket" "azure"))) }}
{{- fail (printf "reloader.git.repositories[%d] (%s): pullRequest.host must be github, gitlab, gitea, bitbucket or azure, got %q" $i $repo.name .host) }}
{{- end }}
{{- if and .enabled (not .host) }}
{{- fail (printf "reloader.git.repositories[%d] (%s): pullRequest.enabled needs pullRequest.host" $i $repo.name) }}
{{- end }}
{{- if and .grouping (not (has .grouping (list "workload" "repository"))) }}
{{- fail (printf "reloader.git.repositories[%d] (%s): pullRequest.grouping must be workload or repository" $i $repo.name) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* "ssh" or "token": how a repository authenticates (explicit, else from its URL). */}}
{{- define "gitops-reloader.credentialsType" -}}
{{- if .credentialsType }}
{{- .credentialsType }}
{{- else if or (hasPrefix "ssh://" .url) (regexMatch "^[A-Za-z0-9._-]+@[^:/]+:" .url) }}
{{- "ssh" }}
{{- else }}
{{- "token" }}
{{- end }}
{{- end }}

{{/* The content of git-config.yaml (see docs: repositories with credential file paths). */}}
{{- define "gitops-reloader.gitConfig" -}}
{{- $dir := include "gitops-reloader.gitConfigDir" . }}
{{- $repos := list }}
{{- range .Values.reloader.git.repositories }}
{{- $repo := omit . "credentialsSecret" "credentialsType" "githubAppSecret" "signingKeySecret" "signingKeyFormat" }}
{{- if .credentialsSecret }}
{{- $creds := printf "%s/credentials/%s" $dir .name }}
{{- if eq (include "gitops-reloader.credentialsType" .) "ssh" }}
{{- $_ := set $repo "sshKeyFile" (printf "%s/ssh-privatekey" $creds) }}
{{- $_ := set $repo "knownHostsFile" (printf "%s/known_hosts" $creds) }}
{{- /* The host's API needs a token even when git uses ssh: the Secret's `token` key. */}}
{{- if and .pullRequest .pullRequest.enabled (not .pullRequest.tokenFile) }}
{{- $_ := set $repo "pullRequest" (merge (dict "tokenFile" (printf "%s/token" $creds)) .pullRequest) }}
{{- end }}
{{- else }}
{{- $_ := set $repo "tokenFile" (printf "%s/token" $creds) }}
{{- end }}
{{- end }}
{{- /* A GitHub App: its private key from githubAppSecret (key private-key.pem), the rest as given. */}}
{{- if .githubAppSecret }}
{{- $_ := set $repo "githubApp" (merge (dict "privateKeyFile" (printf "%s/github-app/%s/private-key.pem" $dir .name)) (.githubApp | default dict)) }}
{{- end }}
{{- /* The commit signing key from signingKeySecret (key signing-key). */}}
{{- if .signingKeySecret }}
{{- $_ := set $repo "signingKey" (dict "file" (printf "%s/signing/%s/signing-key" $dir .name) "format" (.signingKeyFormat | default "ssh")) }}
{{- end }}
{{- $repos = append $repos $repo }}
{{- end }}
{{- $config := dict "repositories" $repos }}
{{- with .Values.reloader.git.argocdNamespace }}{{ $_ := set $config "argocdNamespace" . }}{{ end }}
{{- toYaml $config }}
{{- end }}

{{/*
RBAC rules of the main (Cluster)Role, computed from the enabled features: read what is
watched, write only the workload kinds that are reloaded. Writes to Secrets and Leases
live in the namespaced "-self" Role (role-self.yaml), never here.
*/}}
{{- define "gitops-reloader.rules" -}}
{{- $r := .Values.reloader }}
{{- $rules := list }}
{{- $sources := list }}
{{- if not $r.ignoreConfigMaps }}{{ $sources = append $sources "configmaps" }}{{ end }}
{{- if not $r.ignoreSecrets }}{{ $sources = append $sources "secrets" }}{{ end }}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" $sources "verbs" (list "get" "list" "watch")) }}
{{- $rules = append $rules (dict "apiGroups" (list "apps") "resources" (list "deployments" "daemonsets" "statefulsets") "verbs" (list "get" "list" "watch" "patch" "update")) }}
{{- if not $r.ignoreJobs }}
{{- $rules = append $rules (dict "apiGroups" (list "batch") "resources" (list "jobs") "verbs" (list "create" "delete" "get" "list" "watch")) }}
{{- else if not $r.ignoreCronJobs }}
{{- /* A CronJob reload creates a Job from its template. */}}
{{- $rules = append $rules (dict "apiGroups" (list "batch") "resources" (list "jobs") "verbs" (list "create")) }}
{{- end }}
{{- if not $r.ignoreCronJobs }}
{{- $rules = append $rules (dict "apiGroups" (list "batch") "resources" (list "cronjobs") "verbs" (list "get" "list" "watch")) }}
{{- end }}
{{- if $r.isArgoRollouts }}
{{- $rules = append $rules (dict "apiGroups" (list "argoproj.io") "resources" (list "rollouts") "verbs" (list "get" "list" "watch" "patch" "update")) }}
{{- end }}
{{- if $r.isOpenshift }}
{{- $rules = append $rules (dict "apiGroups" (list "apps.openshift.io") "resources" (list "deploymentconfigs") "verbs" (list "get" "list" "watch" "patch" "update")) }}
{{- end }}
{{- /* Built-in kinds found through discovery, and --workload-kinds-config kinds: get/list/watch/patch each. */}}
{{- range include "gitops-reloader.extraKinds" . | fromYamlArray }}
{{- $rules = append $rules (dict "apiGroups" (list .group) "resources" (list .plural) "verbs" (list "get" "list" "watch" "patch")) }}
{{- end }}
{{- if $r.enableCSIIntegration }}
{{- /* Secrets Store CSI: the driver's objects, and the owner links from a pod to its workload. */}}
{{- $rules = append $rules (dict "apiGroups" (list "secrets-store.csi.x-k8s.io") "resources" (list "secretproviderclasspodstatuses" "secretproviderclasses") "verbs" (list "get" "list" "watch")) }}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (ternary (list "pods" "replicationcontrollers") (list "pods") (not (not $r.isOpenshift))) "verbs" (list "get")) }}
{{- $rules = append $rules (dict "apiGroups" (list "apps") "resources" (list "replicasets") "verbs" (list "get")) }}
{{- if or (not $r.ignoreJobs) (not $r.ignoreCronJobs) }}
{{- $rules = append $rules (dict "apiGroups" (list "batch") "resources" (list "jobs") "verbs" (list "get")) }}
{{- end }}
{{- end }}
{{- if ne (include "gitops-reloader.evictionMode" .) "off" }}
{{- /* --eviction: a workload's pods, and the Eviction API (never delete on pods). */}}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "pods") "verbs" (list "get" "list")) }}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "pods/eviction") "verbs" (list "create")) }}
{{- $rules = append $rules (dict "apiGroups" (list "policy") "resources" (list "poddisruptionbudgets") "verbs" (list "get" "list")) }}
{{- range $r.eviction.intermediateOwners }}
{{- $rules = append $rules (dict "apiGroups" (list (.group | default "")) "resources" (list .plural) "verbs" (list "get")) }}
{{- end }}
{{- end }}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "events") "verbs" (list "create" "patch")) }}
{{- $rules = append $rules (dict "apiGroups" (list "events.k8s.io") "resources" (list "events") "verbs" (list "create" "patch")) }}
{{- if and (include "gitops-reloader.gitEnabled" .) (ne (toString $r.git.applyTimeout) "0") }}
{{- /* The git follow-up: after a restart, whether Applied / NotApplied was already reported. */}}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "events") "verbs" (list "list")) }}
{{- end }}
{{- $selectors := $r.namespaceSelector }}
{{- range $r.shards }}{{ if .namespaceSelector }}{{ $selectors = true }}{{ end }}{{ end }}
{{- /* Namespaces: --namespace-selector, and each namespace's reload-window annotation. */}}
{{- if and (or $selectors $r.reloadWindows.windows) $r.watchGlobally }}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "namespaces") "verbs" (list "get" "list" "watch")) }}
{{- end }}
{{- /* Argo CD / Flux objects: Roles in their namespaces only (rbac-gitops.yaml). */}}
{{- toYaml $rules }}
{{- end }}

{{/*
The workload kinds beyond the core ones, as a YAML list of {group, plural}: Knative Services
and the OpenKruise kinds unless turned off, then reloader.workloadKinds.
*/}}
{{- define "gitops-reloader.extraKinds" -}}
{{- $r := .Values.reloader }}
{{- $kinds := list }}
{{- if $r.knativeServices }}{{ $kinds = append $kinds (dict "group" "serving.knative.dev" "plural" "services") }}{{ end }}
{{- if $r.openKruise }}
{{- range list "clonesets" "statefulsets" "daemonsets" }}{{ $kinds = append $kinds (dict "group" "apps.kruise.io" "plural" .) }}{{ end }}
{{- end }}
{{- range $r.workloadKinds }}{{ $kinds = append $kinds (dict "group" .group "plural" .plural) }}{{ end }}
{{- toYaml $kinds }}
{{- end }}

{{/* The --reload-windows-config file: reloader.reloadWindows as the controller reads it. */}}
{{- define "gitops-reloader.reloadWindowsConfig" -}}
{{- $w := .Values.reloader.reloadWindows }}
{{- $config := dict "windows" $w.windows }}
{{- with $w.default }}{{ $_ := set $config "default" . }}{{ end }}
{{- toYaml $config }}
{{- end }}

{{/* The --workload-kinds-config file: reloader.workloadKinds as the controller reads it. */}}
{{- define "gitops-reloader.workloadKindsConfig" -}}
{{- toYaml (dict "kinds" .Values.reloader.workloadKinds) }}
{{- end }}

{{/* Rules of the "-self" Role in the release namespace: HA Lease, failure record, digest key Secret, state-store and meta-info ConfigMaps. */}}
{{- define "gitops-reloader.selfRules" -}}
{{- $rules := list }}
{{- if .Values.reloader.enableHA }}
{{- /* create cannot be restricted by resourceNames; get/update only touch our Lease. */}}
{{- $rules = append $rules (dict "apiGroups" (list "coordination.k8s.io") "resources" (list "leases") "verbs" (list "create")) }}
{{- $leases := list }}
{{- range fromYamlArray (include "gitops-reloader.shards" .) }}{{ $leases = append $leases .leaseHeld }}{{ end }}
{{- $rules = append $rules (dict "apiGroups" (list "coordination.k8s.io") "resources" (list "leases") "resourceNames" $leases "verbs" (list "get" "update")) }}
{{- end }}
{{- /* The failure record (<lease>-failures, one per shard): what is failing survives a restart. */}}
{{- $records := list }}
{{- range fromYamlArray (include "gitops-reloader.shards" .) }}{{ $records = append $records (printf "%s-failures" .leaseHeld) }}{{ end }}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "configmaps") "verbs" (list "create")) }}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "configmaps") "resourceNames" $records "verbs" (list "get" "update")) }}
{{- if or (include "gitops-reloader.gitEnabled" .) (include "gitops-reloader.stateStoreEnabled" .) }}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "secrets") "verbs" (list "create")) }}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "secrets") "resourceNames" (list (include "gitops-reloader.digestKeySecret" .)) "verbs" (list "get" "update")) }}
{{- end }}
{{- if include "gitops-reloader.stateStoreEnabled" . }}
{{- /* Shard names grow with the data (<name>-0, -1, ...): not restricted by resourceNames. */}}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "configmaps") "verbs" (list "get" "list" "create" "update")) }}
{{- end }}
{{- if .Values.reloader.publishMetaInfo }}
{{- /* create: granted above for the failure record. */}}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "configmaps") "resourceNames" (list "reloader-meta-info") "verbs" (list "get" "update")) }}
{{- end }}
{{- if $rules }}
{{- toYaml $rules }}
{{- end }}
{{- end }}

{{/* "true" when the controller talks to hosts outside the cluster (git, webhooks, alerts). */}}
{{- define "gitops-reloader.externalEgress" -}}
{{- $alerts := false }}
{{- range $name, $_ := .Values.reloader.deployment.env.open }}{{ if hasPrefix "ALERT_" $name }}{{ $alerts = true }}{{ end }}{{ end }}
{{- range $name, $_ := .Values.reloader.deployment.env.secret }}{{ if hasPrefix "ALERT_" $name }}{{ $alerts = true }}{{ end }}{{ end }}
{{- range $_, $vars := .Values.reloader.deployment.env.existing }}{{ range $name, $_ := $vars }}{{ if hasPrefix "ALERT_" $name }}{{ $alerts = true }}{{ end }}{{ end }}{{ end }}
{{- if or (include "gitops-reloader.gitEnabled" .) .Values.reloader.webhookUrl $alerts }}true{{ end }}
{{- end }}

{{/*
Container args, each "--flag=value" with a flag from gitops_reloader.config.FLAGS
(tests/unit/test_helm_chart.py checks every one). Flags at their default are left out.
Called with (dict "root" $ "shard" <an entry of gitops-reloader.shards>).
*/}}
{{- define "gitops-reloader.args" -}}
{{- $root := .root }}
{{- $shard := .shard }}
{{- $r := $root.Values.reloader }}
{{- $args := list }}
{{- with include "gitops-reloader.reloadStrategy" $root }}{{ $args = append $args (printf "--reload-strategy=%s" .) }}{{ end }}
{{- if has ($r.defaultSink | default "") (list "git" "pull-request" "webhook") }}{{ $args = append $args (printf "--default-sink=%s" $r.defaultSink) }}{{ end }}
{{- if $r.autoReloadAll }}{{ $args = append $args "--auto-reload-all=true" }}{{ end }}
{{- if $r.reloadOnCreate }}{{ $args = append $args "--reload-on-create=true" }}{{ end }}
{{- if $r.reloadOnDelete }}{{ $args = append $args "--reload-on-delete=true" }}{{ end }}
{{- if $r.syncAfterRestart }}{{ $args = append $args "--sync-after-restart=true" }}{{ end }}
{{- if eq ($r.reloadOn | default "any-change") "used-keys" }}{{ $args = append $args "--reload-on=used-keys" }}{{ end }}
{{- if $r.pruneStaleEnvVars }}{{ $args = append $args "--prune-stale-env-vars=true" }}{{ end }}
{{- if $r.ignoreSecrets }}{{ $args = append $args "--resources-to-ignore=secrets" }}{{ end }}
{{- if $r.ignoreConfigMaps }}{{ $args = append $args "--resources-to-ignore=configMaps" }}{{ end }}
{{- $ignored := list }}
{{- if $r.ignoreJobs }}{{ $ignored = append $ignored "jobs" }}{{ end }}
{{- if $r.ignoreCronJobs }}{{ $ignored = append $ignored "cronjobs" }}{{ end }}
{{- if not $r.knativeServices }}{{ $ignored = append $ignored "services.serving.knative.dev" }}{{ end }}
{{- if not $r.openKruise }}{{ $ignored = concat $ignored (list "clonesets.apps.kruise.io" "statefulsets.apps.kruise.io" "daemonsets.apps.kruise.io") }}{{ end }}
{{- if $ignored }}{{ $args = append $args (printf "--ignored-workload-types=%s" (join "," $ignored)) }}{{ end }}
{{- if not $r.watchGlobally }}{{ $args = append $args (printf "--namespaces=%s" (include "gitops-reloader.watchNamespaces" $root | fromJsonArray | join ",")) }}{{ end }}
{{- with $r.ignoreNamespaces }}{{ $args = append $args (printf "--namespaces-to-ignore=%s" .) }}{{ end }}
{{- if and (hasKey $r "ignoreSecretTypes") (ne (toString $r.ignoreSecretTypes) "helm.sh/release.v1") }}{{ $args = append $args (printf "--ignore-secret-types=%s" (toString $r.ignoreSecretTypes)) }}{{ end }}
{{- /* --namespace-selector and --shard-*: per shard (gitops-reloader.shards). */}}
{{- $args = concat $args $shard.args }}
{{- with $r.resourceLabelSelector }}{{ $args = append $args (printf "--resource-label-selector=%s" .) }}{{ end }}
{{- $annotationFlags := dict "auto" "--auto-annotation" "configmap" "--configmap-annotation" "secret" "--secret-annotation" "configmap_auto" "--configmap-auto-annotation" "secret_auto" "--secret-auto-annotation" "search" "--auto-search-annotation" "match" "--search-match-annotation" "pause_deployment" "--pause-deployment-annotation" "pause_deployment_time" "--pause-deployment-time-annotation" "secretproviderclass" "--secretproviderclass-annotation" "secretproviderclass_auto" "--secretproviderclass-auto-annotation" }}
{{- range $key, $value := ($r.custom_annotations | default dict) }}
{{- if not (hasKey $annotationFlags $key) }}
{{- fail (printf "reloader.custom_annotations.%s: unknown key (use one of %s)" $key (keys $annotationFlags | sortAlpha | join ", ")) }}
{{- end }}
{{- if $value }}{{ $args = append $args (printf "%s=%s" (get $annotationFlags $key) $value) }}{{ end }}
{{- end }}
{{- with $r.webhookUrl }}{{ $args = append $args (printf "--webhook-url=%s" .) }}{{ end }}
{{- if $r.isArgoRollouts }}{{ $args = append $args "--is-Argo-Rollouts=true" }}{{ end }}
{{- if $r.enableCSIIntegration }}{{ $args = append $args "--enable-csi-integration=true" }}{{ end }}
{{- $args = append $args (printf "--is-openshift=%s" (ternary "true" "false" (not (not $r.isOpenshift)))) }}
{{- /* The Lease name also names the failure record (<lease>-failures), HA or not. */}}
{{- $args = append $args (printf "--lease-name=%s" $shard.lease) }}
{{- if $r.enableHA }}
{{- $args = append $args "--enable-ha=true" }}
{{- /* A pod stopped by a rollout hands the Lease over at once instead of leaving the
       standby to wait out the lease duration. */}}
{{- $args = append $args "--leader-election-release-on-cancel=true" }}
{{- end }}
{{- if $r.dryRun }}{{ $args = append $args "--dry-run=true" }}{{ end }}
{{- with $r.logFormat }}{{ $args = append $args (printf "--log-format=%s" .) }}{{ end }}
{{- with $r.logLevel }}{{ $args = append $args (printf "--log-level=%s" .) }}{{ end }}
{{- with $r.coalesceWindow }}{{ $args = append $args (printf "--coalesce-window=%s" (toString .)) }}{{ end }}
{{- if $r.workloadKinds }}{{ $args = append $args (printf "--workload-kinds-config=%s/workload-kinds.yaml" (include "gitops-reloader.gitConfigDir" $root)) }}{{ end }}
{{- if $r.reloadWindows.windows }}{{ $args = append $args (printf "--reload-windows-config=%s/reload-windows.yaml" (include "gitops-reloader.gitConfigDir" $root)) }}{{ end }}
{{- with $r.rollouts }}
{{- with .maxConcurrent }}{{ $args = append $args (printf "--max-concurrent-rollouts=%d" (int .)) }}{{ end }}
{{- with .maxConcurrentPerNamespace }}{{ $args = append $args (printf "--max-concurrent-rollouts-per-namespace=%d" (int .)) }}{{ end }}
{{- with .timeout }}{{ $args = append $args (printf "--rollout-timeout=%s" (toString .)) }}{{ end }}
{{- if kindIs "bool" .holdOnFailedRollout }}{{ $args = append $args (printf "--hold-on-failed-rollout=%t" .holdOnFailedRollout) }}{{ end }}
{{- end }}
{{- with $r.eviction }}
{{- $mode := include "gitops-reloader.evictionMode" $root }}
{{- if ne $mode "off" }}{{ $args = append $args (printf "--eviction=%s" $mode) }}{{ end }}
{{- with .interval }}{{ $args = append $args (printf "--eviction-interval=%s" (toString .)) }}{{ end }}
{{- if ne (int .atOnce) 1 }}{{ $args = append $args (printf "--evictions-at-once=%d" (int .atOnce)) }}{{ end }}
{{- end }}
{{- if include "gitops-reloader.gitEnabled" $root }}
{{- $args = append $args (printf "--git-config=%s/git-config.yaml" (include "gitops-reloader.gitConfigDir" $root)) }}
{{- $args = append $args (printf "--git-cache-dir=%s" $r.git.cacheDir) }}
{{- $args = append $args (printf "--digest-key-secret=%s" (include "gitops-reloader.digestKeySecret" $root)) }}
{{- $args = append $args (printf "--pr-grouping=%s" $r.git.prGrouping) }}
{{- $args = append $args (printf "--request-refresh=%s" (ternary "true" "false" (not (not $r.requestRefresh)))) }}
{{- $args = append $args (printf "--git-apply-timeout=%s" (toString $r.git.applyTimeout)) }}
{{- end }}
{{- if include "gitops-reloader.stateStoreEnabled" $root }}
{{- $args = append $args "--state-store=configmap" }}
{{- $args = append $args (printf "--state-store-name=%s" $shard.stateStore) }}
{{- if not (include "gitops-reloader.gitEnabled" $root) }}
{{- $args = append $args (printf "--digest-key-secret=%s" (include "gitops-reloader.digestKeySecret" $root)) }}
{{- end }}
{{- end }}
{{- range $r.extraArgs }}{{ $args = append $args (toString .) }}{{ end }}
{{- range $shard.extraArgs }}{{ $args = append $args (toString .) }}{{ end }}
{{- toYaml $args }}
{{- end }}

{{/*
reloader.eviction.mode as the flag reads it. YAML 1.1 (Helm's) reads an unquoted off as the
boolean false, taken as "off"; an unquoted on/yes/true is no mode and is refused.
*/}}
{{- define "gitops-reloader.evictionMode" -}}
{{- $mode := .Values.reloader.eviction.mode -}}
{{- if kindIs "bool" $mode -}}
{{- if $mode -}}
{{- fail "reloader.eviction.mode is the boolean true (YAML reads an unquoted on, yes or true so): write \"annotated\" or \"on-delete\", quoted" -}}
{{- end -}}
off
{{- else -}}
{{- $mode -}}
{{- end -}}
{{- end }}

{{/*
The namespaces a namespaced install watches (JSON list): the release namespace and
reloader.namespaces (a list, or a comma list as Stakater's chart also takes), deduped, sorted.
*/}}
{{- define "gitops-reloader.watchNamespaces" -}}
{{- $listed := .Values.reloader.namespaces | default list -}}
{{- if kindIs "string" $listed -}}{{- $listed = splitList "," $listed -}}{{- end -}}
{{- $all := list .Release.Namespace -}}
{{- range $listed -}}{{- with (toString . | trim) -}}{{- $all = append $all . -}}{{- end -}}{{- end -}}
{{- $all | uniq | sortAlpha | toJson -}}
{{- end -}}
