{{/*
Short name: nameOverride, else the chart name; at most 63 characters.
*/}}
{{- define "aws-vpc-cni.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Name of the objects: fullnameOverride, else the release name, joined with
the short name unless it already contains it; at most 63 characters.
*/}}
{{- define "aws-vpc-cni.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "aws-vpc-cni.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Chart name and version, usable as a label value.
*/}}
{{- define "aws-vpc-cni.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Labels selecting the pods when originalMatchLabels is false.
*/}}
{{- define "aws-vpc-cni.selectorLabels" -}}
app.kubernetes.io/name: {{ include "aws-vpc-cni.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
Labels of every templated object. scripts/generate-config drops the
helm.sh/chart and app.kubernetes.io/managed-by lines from config/master.
*/}}
{{- define "aws-vpc-cni.labels" -}}
{{ include "aws-vpc-cni.selectorLabels" . }}
k8s-app: aws-node
helm.sh/chart: {{ include "aws-vpc-cni.chart" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
Service account of the pods.
*/}}
{{- define "aws-vpc-cni.serviceAccountName" -}}
{{- default (include "aws-vpc-cni.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/*
Image reference. Argument: dict with "image" (an image block of the values)
and "repository" (the ECR repository name).
  override            -> used as is
  overrideRepository  -> <overrideRepository>:<tag>
  otherwise           -> <account>.dkr.<endpoint>.<region>.<domain>/<repository>:<tag>
*/}}
{{- define "aws-vpc-cni.imageRef" -}}
{{- $img := .image -}}
{{- if $img.override -}}
{{- $img.override -}}
{{- else if $img.overrideRepository -}}
{{- printf "%s:%s" $img.overrideRepository (toString $img.tag) -}}
{{- else -}}
{{- printf "%s.dkr.%s.%s.%s/%s:%s" (toString $img.account) $img.endpoint $img.region $img.domain .repository (toString $img.tag) -}}
{{- end -}}
{{- end -}}

{{- define "aws-vpc-cni.image" -}}
{{- include "aws-vpc-cni.imageRef" (dict "image" .Values.image "repository" "amazon-k8s-cni") -}}
{{- end -}}

{{- define "aws-vpc-cni.initImage" -}}
{{- include "aws-vpc-cni.imageRef" (dict "image" .Values.init.image "repository" "amazon-k8s-cni-init") -}}
{{- end -}}

{{- define "aws-vpc-cni.nodeAgentImage" -}}
{{- include "aws-vpc-cni.imageRef" (dict "image" .Values.nodeAgent.image "repository" "amazon/aws-network-policy-agent") -}}
{{- end -}}

{{/*
True ("true") when a value reads as true the way ipamd parses booleans
(strconv.ParseBool); empty otherwise.
*/}}
{{- define "aws-vpc-cni.isTrue" -}}
{{- if has (toString .) (list "1" "t" "T" "true" "TRUE" "True") -}}true{{- end -}}
{{- end -}}

{{/*
Environment of the aws-node container from env, as a YAML list sorted by
name: NETWORK_POLICY_ENFORCING_MODE dropped without the node agent,
AWS_VPC_CNI_CONFLIST_CNI_VERSION added from cniVersion unless cniConfig
supplies the whole conflist. Null values are dropped by Helm before this.
*/}}
{{- define "aws-vpc-cni.env" -}}
{{- $env := deepCopy (.Values.env | default dict) -}}
{{- if not .Values.nodeAgent.enabled -}}
{{- $_ := unset $env "NETWORK_POLICY_ENFORCING_MODE" -}}
{{- end -}}
{{- $customConflist := and .Values.cniConfig.enabled .Values.cniConfig.fileContents -}}
{{- if and .Values.cniVersion (not $customConflist) -}}
{{- $_ := set $env "AWS_VPC_CNI_CONFLIST_CNI_VERSION" (toString .Values.cniVersion) -}}
{{- end -}}
{{- range $name := keys $env | sortAlpha }}
{{- $v := get $env $name }}
{{- if not (kindIs "invalid" $v) }}
- name: {{ $name }}
  value: {{ include "aws-vpc-cni.scalar" $v | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
A scalar value as text. Helm reads numbers of values files as floats;
whole numbers are printed without a fraction or exponent (1048576, not
1.048576e+06).
*/}}
{{- define "aws-vpc-cni.scalar" -}}
{{- if and (kindIs "float64" .) (eq . (floor .)) -}}
{{- int64 . -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}

{{/*
Fail early on settings that would give a pod that cannot start or a
reconciler that cannot reach the runtime.
*/}}
{{- define "aws-vpc-cni.validate" -}}
{{- if .Values.cniVersion -}}
{{- if not (regexMatch "^[0-9]+\\.[0-9]+\\.[0-9]+$" (toString .Values.cniVersion)) -}}
{{- fail (printf "cniVersion %q: want a CNI spec version such as 1.1.0, or empty" (toString .Values.cniVersion)) -}}
{{- end -}}
{{- end -}}
{{- if .Values.cniConfig.enabled -}}
{{- if not .Values.cniConfig.fileContents -}}
{{- fail "cniConfig.enabled needs cniConfig.fileContents (the whole 10-aws.conflist)" -}}
{{- end -}}
{{- if hasKey (fromJson .Values.cniConfig.fileContents) "Error" -}}
{{- fail "cniConfig.fileContents is not a JSON object" -}}
{{- end -}}
{{- end -}}
{{- if .Values.criSocket.enabled -}}
{{- if not (hasPrefix "/" (toString .Values.criSocket.hostPath)) -}}
{{- fail "criSocket.hostPath must be an absolute path" -}}
{{- end -}}
{{- $endpoint := toString (get (.Values.env | default dict) "CRI_RUNTIME_ENDPOINT") -}}
{{- if and (hasPrefix "unix://" $endpoint) (ne (trimPrefix "unix://" $endpoint) .Values.criSocket.hostPath) -}}
{{- fail (printf "env.CRI_RUNTIME_ENDPOINT %q does not name the mounted socket criSocket.hostPath %q" $endpoint .Values.criSocket.hostPath) -}}
{{- end -}}
{{- end -}}
{{- end -}}
