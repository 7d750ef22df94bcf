{{/*
perf-operator.fullname is the prefix of every object's name: the release name, or
"<release>-perf-operator" when the release name does not already say perf-operator.
Kept to 52 characters so derived names ("-manager", "-leader-election") stay
within 63.
*/}}
{{- define "perf-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* perf-operator.selectorLabels select the manager's pods; they never change after install. */}}
{{- define "perf-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* perf-operator.labels go on every object. */}}
{{- define "perf-operator.labels" -}}
{{ include "perf-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* perf-operator.serviceAccountName is the manager's identity, created or not. */}}
{{- define "perf-operator.serviceAccountName" -}}
{{- default (include "perf-operator.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/*
perf-operator.watchNamespaces validates the scope against the namespaces and
returns them comma-separated for --watch-namespaces. Every template that depends
on the scope includes it, so a bad combination fails whatever is rendered.
*/}}
{{- define "perf-operator.watchNamespaces" -}}
{{- if and (eq .Values.rbac.scope "namespaced") (empty .Values.watchNamespaces) -}}
{{- fail "rbac.scope=namespaced needs at least one namespace in watchNamespaces (the operator gets a Role in each and watches only those); list them, e.g. --set 'watchNamespaces={team-a,team-b}', or use rbac.scope=cluster" -}}
{{- end -}}
{{- join "," .Values.watchNamespaces -}}
{{- end -}}

{{/*
perf-operator.managerRules are the manager's RBAC rules: those controller-gen
generates from the controllers' kubebuilder markers into config/rbac/role.yaml,
which hack/generate.sh copies to files/manager-role.yaml. The chart never states
a rule of its own, so it grants exactly what the code declares it needs. With
toggles.exec.enabled it adds the pods/exec rule of files/exec-role.yaml (a copy
of config/rbac/exec/exec_role.yaml).
*/}}
{{- define "perf-operator.managerRules" -}}
{{- $role := .Files.Get "files/manager-role.yaml" | fromYaml -}}
{{- if not $role.rules -}}
{{- fail "files/manager-role.yaml has no rules: run hack/generate.sh" -}}
{{- end -}}
rules:
{{ toYaml $role.rules }}
{{- if .Values.toggles.exec.enabled }}
{{- $exec := .Files.Get "files/exec-role.yaml" | fromYaml }}
{{ toYaml $exec.rules }}
{{- end }}
{{- end -}}
