{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "koo.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-qualified name; the release name alone when it already contains the chart name. */}}
{{- define "koo.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "koo.selectorLabels" -}}
app.kubernetes.io/name: {{ include "koo.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "koo.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "koo.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "koo.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "koo.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "koo.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
The operator's rules in a namespace it watches: a ClusterRole's rules in the cluster-wide mode,
a Role's in each namespace of watchNamespaces. Each rule names the code that makes the call;
docs/rbac.md explains them.
*/}}
{{- define "koo.namespacedRules" -}}
# get: the fresh read at the start of each reconcile (src/reconciler/reconcile.rs, apply:
#   get_opt) and the promotion automation's one fresh read after its status write met a
#   conflict (src/automation/task.rs, record). list, watch: the controller's primary watch (src/reconciler/mod.rs, run:
#   Controller::new) and the promotion automation's watch (src/automation/mod.rs, supervise).
# patch: adding and removing the finalizer kafkaobserver.io/observer-lists (kube-runtime's
#   finalizer helper, called in src/reconciler/reconcile.rs, reconcile: JSON patches).
- apiGroups: [kafkaobserver.io]
  resources: [observersets]
  verbs: [get, list, watch, patch]
# patch: server-side apply of the status by the reconciler (src/k8s/status.rs, apply) and by
#   the promotion automation (src/automation/task.rs, record).
- apiGroups: [kafkaobserver.io]
  resources: [observersets/status]
  verbs: [patch]
# The <observerset>-observers-controller and -broker ConfigMaps.
# get: src/reconciler/observe.rs, roles (get_opt). list, watch: Controller::owns
#   (src/reconciler/mod.rs, run). patch: server-side apply (src/k8s/config_map.rs, apply)
#   and the owner-reference removal on Retain (src/k8s/config_map.rs, release).
# create: that server-side apply creates the ConfigMap when it does not exist yet, and the
#   apiserver then also authorizes the patch as `create`.
# delete: deletionPolicy Delete (src/k8s/config_map.rs, delete); with the
#   OwnerReferencesPermissionEnforcement admission plugin, also what removing our owner
#   reference (release) is checked against.
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, patch, delete]
# list: the pods of each role (src/k8s/dereference.rs, list_role_pods) and the pods that
#   still mount the ConfigMaps on deletion (src/k8s/finalizer.rs, clean_up). watch: with
#   list, Controller::watches (src/reconciler/mod.rs, run). patch: the nudge annotation that
#   makes the kubelet remount at once (src/k8s/nudge.rs, nudge).
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch, patch]
# kube-runtime's events::Recorder writes events.k8s.io/v1 Events only (create, then patch
#   of a repeated one's series): src/k8s/events.rs (Events::publish) and
#   src/automation/task.rs (SetTask's recorder).
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- if and .Values.rbac.readSecrets (not .Values.rbac.secretNamespaces) }}
# get: the Secrets an ObserverSet names in spec.kafka.tls/sasl, one GET each per scan, in the
#   ObserverSet's namespace (src/k8s/secrets.rs, read_secrets; called by
#   src/automation/task.rs, connection_settings). With rbac.secretNamespaces, a Role in those
#   namespaces only instead (secrets-role.yaml).
- apiGroups: [""]
  resources: [secrets]
  verbs: [get]
{{- end }}
{{- end }}
