{{/* perf-operator.name is the chart's name, or nameOverride. */}}
{{- define "perf-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{/*
perf-operator.fullname is the prefix of every object's name: fullnameOverride when
set; else the release name, or "<release>-<name>" when the release name does not
already contain the name (nameOverride or the chart's). Kept to 52 characters so
derived names ("-manager", "-leader-election", "-metrics") stay within 63.
*/}}
{{- define "perf-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "perf-operator.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* perf-operator.selectorLabels select the manager's pods; they never change after install. */}}
{{- define "perf-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "perf-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
perf-operator.labels go on every object: commonLabels, then the standard labels,
which win over a commonLabels key of the same name (a duplicate key would make
the manifest invalid, and the selector labels must stay what they are).
*/}}
{{- define "perf-operator.labels" -}}
{{- $std := dict
  "app.kubernetes.io/name" (include "perf-operator.name" .)
  "app.kubernetes.io/instance" .Release.Name
  "app.kubernetes.io/version" .Chart.AppVersion
  "app.kubernetes.io/managed-by" .Release.Service
  "helm.sh/chart" (printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_") -}}
{{- toYaml (merge $std (deepCopy (.Values.commonLabels | default dict))) -}}
{{- end -}}

{{/*
perf-operator.image is the manager's image reference: repository@digest when
image.digest is set (the digest pins the bytes; the tag is then ignored), else
repository:tag, the tag defaulting to the chart's appVersion.
*/}}
{{- define "perf-operator.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
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
