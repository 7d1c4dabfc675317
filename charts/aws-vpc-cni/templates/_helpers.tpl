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
Image reference. Argument: dict with "image" (an image block of the
values), "repository" (the repository name), "root" (the chart's context)
and "project" (true: this project's image, false: AWS's node agent).
  override            -> used as is
  overrideRepository  -> <overrideRepository>:<tag>
  any ECR field set, or not a project image
                      -> <account>.dkr.<endpoint>.<region>.<domain>/<repository>:<tag>,
                         upstream's defaults for the fields left empty
  otherwise           -> <projectRegistry>/<repository>:<tag>
An empty tag is the chart's appVersion; for AWS's image of this project's
repositories, the upstream release the chart tracks (appVersion up to its
first "-").
*/}}
{{- define "aws-vpc-cni.imageRef" -}}
{{- $img := .image -}}
{{- $root := .root -}}
{{- $ecr := or (not .project) $img.account $img.region $img.endpoint $img.domain -}}
{{- $tag := toString ($img.tag | default "") -}}
{{- if and (not $tag) (not $img.override) -}}
{{- if not .project -}}
{{- fail (printf "the %s image needs a tag" .repository) -}}
{{- else if and $ecr (not $img.overrideRepository) -}}
{{- $tag = splitList "-" $root.Chart.AppVersion | first -}}
{{- else -}}
{{- $tag = $root.Chart.AppVersion -}}
{{- end -}}
{{- end -}}
{{- if $img.override -}}
{{- $img.override -}}
{{- else if $img.overrideRepository -}}
{{- printf "%s:%s" $img.overrideRepository $tag -}}
{{- else if $ecr -}}
{{- printf "%s.dkr.%s.%s.%s/%s:%s" (toString ($img.account | default "602401143452")) ($img.endpoint | default "ecr") ($img.region | default "us-west-2") ($img.domain | default "amazonaws.com") .repository $tag -}}
{{- else if $root.Values.projectRegistry -}}
{{- printf "%s/%s:%s" (trimSuffix "/" (toString $root.Values.projectRegistry)) .repository $tag -}}
{{- else -}}
{{- fail (printf "no image for %s: set projectRegistry, or the image's override, overrideRepository or ECR fields (account, region)" .repository) -}}
{{- end -}}
{{- end -}}

{{- define "aws-vpc-cni.image" -}}
{{- include "aws-vpc-cni.imageRef" (dict "image" .Values.image "repository" "amazon-k8s-cni" "root" . "project" true) -}}
{{- end -}}

{{- define "aws-vpc-cni.initImage" -}}
{{- include "aws-vpc-cni.imageRef" (dict "image" .Values.init.image "repository" "amazon-k8s-cni-init" "root" . "project" true) -}}
{{- end -}}

{{- define "aws-vpc-cni.nodeAgentImage" -}}
{{- include "aws-vpc-cni.imageRef" (dict "image" .Values.nodeAgent.image "repository" "amazon/aws-network-policy-agent" "root" . "project" false) -}}
{{- end -}}

{{/*
True ("true") when a value reads as true the way ipamd parses booleans
(strconv.ParseBool); empty otherwise.
*/}}
{{- define "aws-vpc-cni.isTrue" -}}
{{- if has (toString . | trim) (list "1" "t" "T" "true" "TRUE" "True") -}}true{{- end -}}
{{- end -}}

{{/*
The runtime socket the pod-IP reconciler talks to, as JSON: {"dir", "socket",
"from"} with criSocket.enabled, {} without. "dir" is mounted, never the
socket file: containerd and CRI-O delete and recreate their socket when they
restart, and a bind mount of the file would keep pointing at the old one.
criSocket.hostPath, the socket file of chart 1.23.1-leakfix.0, still works
(--reuse-values carries it over): it is split into directory and file name
and wins over hostDir and socket. "from" names the value(s) for messages.
*/}}
{{- define "aws-vpc-cni.criSocket" -}}
{{- $c := get .Values "criSocket" | default dict -}}
{{- if not (get $c "enabled") -}}
{}
{{- else if get $c "hostPath" -}}
{{- $p := toString (get $c "hostPath") -}}
{{- dict "dir" (dir $p) "socket" (base $p) "from" (printf "criSocket.hostPath %q" $p) | toJson -}}
{{- else -}}
{{- $d := toString (get $c "hostDir") -}}
{{- $f := toString (get $c "socket") -}}
{{- dict "dir" $d "socket" $f "from" (printf "criSocket.hostDir %q, criSocket.socket %q" $d $f) | toJson -}}
{{- end -}}
{{- end -}}

{{/*
Environment of the aws-node container from env, as a YAML list sorted by
name: NETWORK_POLICY_ENFORCING_MODE dropped without the node agent,
AWS_VPC_CNI_CONFLIST_CNI_VERSION added from cniVersion unless cniConfig
supplies the whole conflist, and the reconciler's runtime settings:
CRI_RUNTIME_ENDPOINT (unix://<dir>/<socket>) unless env sets it, and
POD_IP_RECONCILE_MODE enforce unless env sets it. Without criSocket there
is no endpoint and the mode is off (validate refuses enforce and report).
Null values are dropped by Helm before this.
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
{{- $cri := include "aws-vpc-cni.criSocket" . | fromJson -}}
{{- if get $cri "dir" -}}
{{- if not (hasKey $env "CRI_RUNTIME_ENDPOINT") -}}
{{- $_ := set $env "CRI_RUNTIME_ENDPOINT" (printf "unix://%s/%s" $cri.dir $cri.socket) -}}
{{- end -}}
{{- if not (get $env "POD_IP_RECONCILE_MODE") -}}
{{- $_ := set $env "POD_IP_RECONCILE_MODE" "enforce" -}}
{{- end -}}
{{- else -}}
{{- $_ := unset $env "CRI_RUNTIME_ENDPOINT" -}}
{{- $_ := set $env "POD_IP_RECONCILE_MODE" "off" -}}
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
{{- include "aws-vpc-cni.validateCRISocket" . -}}
{{- $rendered := list "MY_NODE_NAME" "MY_POD_NAME" -}}
{{- range (include "aws-vpc-cni.env" . | fromYamlArray) -}}
{{- $rendered = append $rendered .name -}}
{{- end -}}
{{- range .Values.extraEnv -}}
{{- if has .name $rendered -}}
{{- fail (printf "extraEnv %s: the chart already sets it (from env, criSocket or the pod's own fields); set it in env instead" .name) -}}
{{- end -}}
{{- $rendered = append $rendered .name -}}
{{- end -}}
{{- end -}}

{{/*
The runtime socket directory must be a runtime's own directory: absolute,
clean, at least two levels deep and clear of the pod's other mounts (/run
or /var/run would hide /run/xtables.lock and /var/run/aws-node), with a
socket path Linux can bind (107 bytes). An endpoint set in env must lie
inside it, or the reconciler could not reach it. Without criSocket the
reconciler cannot run, so enforce and report are refused rather than left
to fail on every node.
*/}}
{{- define "aws-vpc-cni.validateCRISocket" -}}
{{- $cri := include "aws-vpc-cni.criSocket" . | fromJson -}}
{{- $env := .Values.env | default dict -}}
{{- if get $cri "from" -}}
{{- $d := toString $cri.dir -}}
{{- if or (not (hasPrefix "/" $d)) (ne $d (clean $d)) (lt (len (splitList "/" (trimPrefix "/" $d))) 2) -}}
{{- fail (printf "%s: the socket directory %q must be an absolute, clean path at least two levels deep, such as /run/containerd" $cri.from $d) -}}
{{- end -}}
{{- if or (not $cri.socket) (contains "/" $cri.socket) (has $cri.socket (list "." "..")) -}}
{{- fail (printf "%s: the socket must be a file name inside the directory, such as containerd.sock" $cri.from) -}}
{{- end -}}
{{- $norm := regexReplaceAll "^/var/run(/|$)" $d "/run${1}" -}}
{{- range $own := list "/app" "/host" "/var/run/aws-node" "/run/xtables.lock" -}}
{{- $o := regexReplaceAll "^/var/run(/|$)" $own "/run${1}" -}}
{{- if or (eq $norm $o) (hasPrefix (printf "%s/" $norm) $o) (hasPrefix (printf "%s/" $o) $norm) -}}
{{- fail (printf "%s: the socket directory %q overlaps aws-node's own mount %s; use the runtime's own directory (criSocket.hostDir), such as /run/containerd" $cri.from $d $own) -}}
{{- end -}}
{{- end -}}
{{- if gt (len (printf "%s/%s" $d $cri.socket)) 107 -}}
{{- fail (printf "%s: the socket path is longer than the 107 bytes Linux allows" $cri.from) -}}
{{- end -}}
{{- $endpoint := toString (get $env "CRI_RUNTIME_ENDPOINT") -}}
{{- $path := $endpoint | trimPrefix "unix://" | trimPrefix "unix:" -}}
{{- if and (hasPrefix "/" $path) (not (hasPrefix (printf "%s/" $d) (clean $path))) -}}
{{- fail (printf "env.CRI_RUNTIME_ENDPOINT %q is outside the mounted socket directory %q (%s): aws-node could not reach it" $endpoint $d $cri.from) -}}
{{- end -}}
{{- else -}}
{{- $mode := lower (toString (get $env "POD_IP_RECONCILE_MODE")) -}}
{{- if has $mode (list "enforce" "report") -}}
{{- fail (printf "env.POD_IP_RECONCILE_MODE=%s needs the container runtime socket, but criSocket.enabled is false: set criSocket.enabled=true or env.POD_IP_RECONCILE_MODE=off" $mode) -}}
{{- end -}}
{{- end -}}
{{- end -}}
