package main

import (
	"fmt"
	"path"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// goMemLimit is the Go soft memory limit the chart sets: 90% of the
// container's memory limit rounded down to a MiB, the share `sluice serve`
// takes by default.
func goMemLimit(limitBytes int64) string {
	return fmt.Sprintf("%dMiB", limitBytes*90/100/(1<<20))
}

// checkSecurity checks the pod's secure defaults: the restricted Pod
// Security Standard, no service-account token, Guaranteed resources, taints
// honoured by the topology spread, and the secrets (cluster secret,
// certificates) wired from Secrets that hold them.
func checkSecurity(name string, o objects, sts *appsv1.StatefulSet, vals map[string]any) []string {
	var p []string
	fail := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	spec := sts.Spec.Template.Spec
	p = append(p, podSecurity("StatefulSet "+name, sts.Spec.Template.ObjectMeta, &spec)...)
	if a := spec.AutomountServiceAccountToken; a == nil || *a {
		fail("StatefulSet %s: automountServiceAccountToken is not false: the nodes call no Kubernetes API", name)
	}
	for _, t := range spec.TopologySpreadConstraints {
		if t.NodeTaintsPolicy == nil || *t.NodeTaintsPolicy != corev1.NodeInclusionPolicyHonor {
			fail("StatefulSet %s: topology spread over %s: nodeTaintsPolicy is not Honor", name, t.TopologyKey)
		}
	}
	if len(spec.Containers) != 1 {
		return p
	}
	c := spec.Containers[0]
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, okR := c.Resources.Requests[r]
		lim, okL := c.Resources.Limits[r]
		if !okR || !okL || req.Cmp(lim) != 0 {
			fail("StatefulSet %s: %s request %s and limit %s differ: the pods are not Guaranteed", name, r, req.String(), lim.String())
		}
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if lim, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		if want := goMemLimit(lim.Value()); env["GOMEMLIMIT"] != want {
			fail("StatefulSet %s: GOMEMLIMIT %q, want %q (90%% of limits.memory %s)", name, env["GOMEMLIMIT"], want, lim.String())
		}
	}
	return append(p, checkSecrets(name, o, spec, c, env, vals)...)
}

// checkSecrets checks that every *_FILE variable names a file in a mounted
// Secret that holds it, and the security mode the values ask for: a cluster
// secret (or SLUICE_INSECURE=true), and the certificates of tls and peerTLS.
func checkSecrets(name string, o objects, spec corev1.PodSpec, c corev1.Container, env map[string]string, vals map[string]any) []string {
	var p []string
	fail := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	mounts := map[string]string{} // mountPath -> Secret
	secretOf := map[string]string{}
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			secretOf[v.Name] = v.Secret.SecretName
		}
	}
	for _, m := range c.VolumeMounts {
		if m.SubPath != "" {
			fail("StatefulSet %s: volumeMount %s uses subPath: the kubelet would never update it", name, m.Name)
		}
		if s, ok := secretOf[m.Name]; ok {
			mounts[m.MountPath] = s
		}
	}
	from := map[string]string{} // variable -> Secret
	for n, v := range env {
		if !strings.HasSuffix(n, "_FILE") || !strings.HasPrefix(n, "SLUICE_") {
			continue
		}
		if from[n] = mounts[path.Dir(v)]; from[n] == "" {
			fail("StatefulSet %s: %s=%s is not in a mounted Secret", name, n, v)
		}
	}
	insecure := enabled(vals, "insecure")
	if insecure != (env["SLUICE_INSECURE"] == "true") {
		fail("StatefulSet %s: SLUICE_INSECURE %q with insecure %v", name, env["SLUICE_INSECURE"], insecure)
	}
	secretFile := env["SLUICE_CLUSTER_SECRET_FILE"]
	switch {
	case insecure && secretFile != "":
		fail("StatefulSet %s: SLUICE_CLUSTER_SECRET_FILE set with insecure", name)
	case !insecure && secretFile == "":
		fail("StatefulSet %s: no SLUICE_CLUSTER_SECRET_FILE: a secure cluster needs its cluster secret", name)
	case !insecure:
		key, _ := value(vals, "clusterSecret.key").(string)
		existing, _ := value(vals, "clusterSecret.existingSecret").(string)
		secret := from["SLUICE_CLUSTER_SECRET_FILE"]
		if path.Base(secretFile) != key {
			fail("StatefulSet %s: SLUICE_CLUSTER_SECRET_FILE=%s, want the key %q", name, secretFile, key)
		}
		if existing != "" {
			if secret != existing || o.secrets[existing] != nil {
				fail("StatefulSet %s: cluster secret from %q (rendered: %v), want the existing Secret %q only", name, secret, o.secrets[existing] != nil, existing)
			}
		} else if s := o.secrets[secret]; s == nil {
			fail("StatefulSet %s: the cluster secret's Secret %q is not rendered", name, secret)
		} else if b := s.Data[key]; len(b) < 32 {
			fail("Secret %s: key %q holds %d bytes, want at least 32", secret, key, len(b))
		}
	}
	for _, t := range []struct{ values, cert, key, ca, prefix string }{
		{"tls", "SLUICE_TLS_CERT_FILE", "SLUICE_TLS_KEY_FILE", "SLUICE_TLS_CLIENT_CA_FILE", "server"},
		{"peerTLS", "SLUICE_PEER_TLS_CERT_FILE", "SLUICE_PEER_TLS_KEY_FILE", "SLUICE_PEER_TLS_CA_FILE", "peer"},
	} {
		existing, _ := value(vals, t.values+".existingSecret").(string)
		cm := enabled(vals, t.values+".certManager.enabled")
		on := existing != "" || cm
		if on != (env[t.cert] != "") || on != (env[t.key] != "") {
			fail("StatefulSet %s: %s=%q %s=%q with %s on: %v", name, t.cert, env[t.cert], t.key, env[t.key], t.values, on)
			continue
		}
		if !on {
			continue
		}
		secret := from[t.cert]
		if from[t.key] != secret || (env[t.ca] != "" && from[t.ca] != secret) {
			fail("StatefulSet %s: %s's files come from different Secrets", name, t.values)
		}
		if existing != "" && secret != existing {
			fail("StatefulSet %s: %s from Secret %q, want %q", name, t.cert, secret, existing)
		}
		if cm {
			p = append(p, checkCertificate(name, o, t.values, t.prefix, secret, vals)...)
		}
	}
	if (env["SLUICE_TLS_CERT_FILE"] != "") != hasHTTPSProbes(c) {
		fail("StatefulSet %s: the probes' scheme does not follow TLS on the HTTP port", name)
	}
	return p
}

func hasHTTPSProbes(c corev1.Container) bool {
	for _, pr := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			return false
		}
	}
	return true
}

// checkCertificate checks the cert-manager Certificate writing a Secret the
// pod mounts: rendered, from the values' issuer, and, for the peer
// certificate, with the peer name and both TLS usages.
func checkCertificate(name string, o objects, values, prefix, secret string, vals map[string]any) []string {
	var p []string
	fail := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	var cert map[string]any
	for _, c := range o.certificates {
		if value(c, "spec.secretName") == secret {
			cert = c
		}
	}
	if cert == nil {
		return []string{fmt.Sprintf("StatefulSet %s: %s: no Certificate writes Secret %s", name, values, secret)}
	}
	if value(cert, "spec.issuerRef.name") != value(vals, values+".certManager.issuerRef.name") {
		fail("Certificate for %s: issuerRef %v, want %s.certManager.issuerRef", secret, value(cert, "spec.issuerRef"), values)
	}
	strs := func(path string) []string {
		l, _ := value(cert, path).([]any)
		var out []string
		for _, e := range l {
			s, _ := e.(string)
			out = append(out, s)
		}
		return out
	}
	if prefix == "peer" {
		peerName, _ := value(vals, "peerTLS.name").(string)
		if !slices.Contains(strs("spec.dnsNames"), peerName) {
			fail("Certificate for %s: dnsNames %v lack the peer name %q", secret, strs("spec.dnsNames"), peerName)
		}
		for _, u := range []string{"server auth", "client auth"} {
			if !slices.Contains(strs("spec.usages"), u) {
				fail("Certificate for %s: usages %v lack %q: it is served and presented", secret, strs("spec.usages"), u)
			}
		}
	} else if !slices.Contains(strs("spec.dnsNames"), name) {
		fail("Certificate for %s: dnsNames %v lack the Service %s", secret, strs("spec.dnsNames"), name)
	}
	return p
}

// checkDefaults checks what the chart's own values.yaml must keep on: the
// NetworkPolicy, a cluster secret rather than insecure, and the data
// directory on a volume.
func checkDefaults(o objects, vals map[string]any) []string {
	var p []string
	if !enabled(vals, "networkPolicy.enabled") || len(o.networkPolicies) == 0 {
		p = append(p, "the NetworkPolicy is off in the chart's defaults (networkPolicy.enabled)")
	}
	if enabled(vals, "insecure") {
		p = append(p, "insecure in the chart's defaults: a cluster secret must be the default")
	}
	if !enabled(vals, "persistence.enabled") {
		p = append(p, "persistence is off in the chart's defaults (persistence.enabled): a stop of every pod would reset every count")
	}
	return p
}
