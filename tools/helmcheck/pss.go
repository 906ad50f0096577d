package main

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
)

// restricted is the Pod Security Standard every pod of the chart meets: the
// restricted level at its latest version, as Kubernetes' own admission
// plugin (k8s.io/pod-security-admission) evaluates it in a namespace
// labelled pod-security.kubernetes.io/enforce=restricted.
var restricted = psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}

// podSecurity evaluates one pod template against the restricted Pod
// Security Standard and returns what it forbids.
func podSecurity(what string, meta metav1.ObjectMeta, spec *corev1.PodSpec) []string {
	ev, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		return []string{fmt.Sprintf("pod security: %v", err)}
	}
	agg := psapolicy.AggregateCheckResults(ev.EvaluatePod(restricted, &meta, spec))
	if agg.Allowed {
		return nil
	}
	return []string{fmt.Sprintf("%s: forbidden by the restricted Pod Security Standard (%s): %s",
		what, restricted.Version, agg.ForbiddenDetail())}
}
