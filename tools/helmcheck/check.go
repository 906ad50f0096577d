package main

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// objects are the rendered manifests, decoded, by name.
type objects struct {
	statefulSets    map[string]*appsv1.StatefulSet
	services        map[string]*corev1.Service
	configMaps      map[string]*corev1.ConfigMap
	pdbs            map[string]*policyv1.PodDisruptionBudget
	networkPolicies map[string]*networkingv1.NetworkPolicy
	secrets         map[string]*corev1.Secret
	serviceMonitors map[string]map[string]any // no Go type here: the operator's CRD
	certificates    map[string]map[string]any // nor here: cert-manager's CRD
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// decode parses every rendered manifest strictly into its API type.
func decode(files map[string]string) (objects, []string) {
	o := objects{
		statefulSets: map[string]*appsv1.StatefulSet{}, services: map[string]*corev1.Service{},
		configMaps: map[string]*corev1.ConfigMap{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		networkPolicies: map[string]*networkingv1.NetworkPolicy{}, serviceMonitors: map[string]map[string]any{},
		secrets: map[string]*corev1.Secret{}, certificates: map[string]map[string]any{},
	}
	var problems []string
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, file := range names {
		for _, text := range docSep.Split(files[file], -1) {
			if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(text, "")) == "" {
				continue
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(text), &head); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", file, err))
				continue
			}
			var err error
			name := head.Metadata.Name
			switch head.Kind {
			case "StatefulSet":
				v := &appsv1.StatefulSet{}
				err, o.statefulSets[name] = yaml.UnmarshalStrict([]byte(text), v), v
			case "Service":
				v := &corev1.Service{}
				err, o.services[name] = yaml.UnmarshalStrict([]byte(text), v), v
			case "ConfigMap":
				v := &corev1.ConfigMap{}
				err, o.configMaps[name] = yaml.UnmarshalStrict([]byte(text), v), v
			case "PodDisruptionBudget":
				v := &policyv1.PodDisruptionBudget{}
				err, o.pdbs[name] = yaml.UnmarshalStrict([]byte(text), v), v
			case "NetworkPolicy":
				v := &networkingv1.NetworkPolicy{}
				err, o.networkPolicies[name] = yaml.UnmarshalStrict([]byte(text), v), v
			case "Secret":
				v := &corev1.Secret{}
				err, o.secrets[name] = yaml.UnmarshalStrict([]byte(text), v), v
			case "Certificate":
				v := map[string]any{}
				err, o.certificates[name] = yaml.Unmarshal([]byte(text), &v), v
			case "ServiceMonitor":
				v := map[string]any{}
				err, o.serviceMonitors[name] = yaml.Unmarshal([]byte(text), &v), v
			default:
				err = fmt.Errorf("unexpected kind %q", head.Kind)
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %s %s: %v", file, head.Kind, name, err))
			}
		}
	}
	return o, problems
}

// value walks a dotted path of the chart's values.
func value(vals map[string]any, path string) any {
	var cur any = vals
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

func enabled(vals map[string]any, path string) bool { b, _ := value(vals, path).(bool); return b }

// selects reports whether a label selector's matchLabels pick labels.
func selects(sel map[string]string, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// check returns what the rendered objects lack that a Sluice cluster needs.
func check(o objects, vals map[string]any, flags map[string]bool) []string {
	var p []string
	fail := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	if len(o.statefulSets) != 1 {
		return []string{fmt.Sprintf("%d StatefulSets rendered, want 1", len(o.statefulSets))}
	}
	var sts *appsv1.StatefulSet
	for _, s := range o.statefulSets {
		sts = s
	}
	name := sts.Name
	pod := sts.Spec.Template
	if sts.Spec.Selector == nil || !selects(sts.Spec.Selector.MatchLabels, pod.Labels) {
		fail("StatefulSet %s: its selector does not select its pods (%v)", name, pod.Labels)
	}
	if want, _ := value(vals, "replicaCount").(float64); sts.Spec.Replicas == nil || float64(*sts.Spec.Replicas) != want {
		fail("StatefulSet %s: replicas %v, want replicaCount %v", name, sts.Spec.Replicas, want)
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		fail("StatefulSet %s: podManagementPolicy %q, want Parallel (pods join each other before they are ready)", name, sts.Spec.PodManagementPolicy)
	}

	// Services: the headless one for gossip and peers, the client one
	// without the peer port.
	gossip := o.services[name+"-gossip"]
	switch {
	case gossip == nil:
		fail("no headless Service %s-gossip", name)
	case sts.Spec.ServiceName != gossip.Name:
		fail("StatefulSet %s: serviceName %q, want %q", name, sts.Spec.ServiceName, gossip.Name)
	case gossip.Spec.ClusterIP != "None" || !gossip.Spec.PublishNotReadyAddresses:
		fail("Service %s: want clusterIP None and publishNotReadyAddresses (seeds before readiness)", gossip.Name)
	case !hasServicePort(gossip, "peer", 8082) || !hasServicePort(gossip, "gossip-udp", 7946):
		fail("Service %s: no peer 8082 or gossip-udp 7946 port", gossip.Name)
	}
	client := o.services[name]
	if client == nil {
		fail("no client Service %s", name)
	} else {
		if !hasServicePort(client, "grpc", 8081) || !hasServicePort(client, "http", 8080) {
			fail("Service %s: no grpc 8081 or http 8080 port", name)
		}
		for _, sp := range client.Spec.Ports {
			if sp.Port == 8082 || sp.TargetPort.String() == "peer" {
				fail("Service %s exposes the peer port", name)
			}
		}
	}
	if rls := o.services[name+"-rls"]; enabled(vals, "rls.service.enabled") != (rls != nil) {
		fail("Service %s-rls rendered: %v, rls.service.enabled: %v", name, rls != nil, enabled(vals, "rls.service.enabled"))
	} else if rls != nil && rls.Spec.ClusterIP != "None" {
		fail("Service %s-rls: want headless (clusterIP None) for Envoy's STRICT_DNS cluster", name)
	}
	for _, s := range o.services {
		if !selects(s.Spec.Selector, pod.Labels) {
			fail("Service %s does not select the StatefulSet's pods", s.Name)
		}
	}

	p = append(p, checkPod(name, sts, vals, flags)...)
	p = append(p, checkSecurity(name, o, sts, vals)...)
	p = append(p, checkPersistence(name, sts, vals)...)
	p = append(p, checkOptional(name, o, client, pod.Labels, vals)...)

	// The volumes' ConfigMaps: the policies always, the RLS rules when set.
	if o.configMaps[name+"-policies"] == nil {
		fail("no ConfigMap %s-policies", name)
	}
	rlsConfig, _ := value(vals, "rls.config").(map[string]any)
	if (len(rlsConfig) > 0) != (o.configMaps[name+"-rls"] != nil) {
		fail("ConfigMap %s-rls rendered: %v, with %d rls.config files", name, o.configMaps[name+"-rls"] != nil, len(rlsConfig))
	}
	return p
}

func hasServicePort(s *corev1.Service, name string, port int32) bool {
	for _, sp := range s.Spec.Ports {
		if sp.Name == name && sp.Port == port {
			return true
		}
	}
	return false
}

// checkPod checks the pod template: topology spread, GOMEMLIMIT and the
// store cap from the memory limit, the join address, the grace period, and
// (with flags) that every SLUICE_* variable is a serve flag.
func checkPod(name string, sts *appsv1.StatefulSet, vals map[string]any, flags map[string]bool) []string {
	var p []string
	fail := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	spec := sts.Spec.Template.Spec
	for k := range sts.Spec.Template.Annotations {
		if strings.HasPrefix(k, "checksum/") {
			fail("StatefulSet %s: pod annotation %s restarts every pod when its config changes; the nodes reload policies and RLS files in place, counters kept", name, k)
		}
	}
	if enabled(vals, "topologySpread.enabled") {
		keys := map[string]corev1.UnsatisfiableConstraintAction{}
		for _, t := range spec.TopologySpreadConstraints {
			keys[t.TopologyKey] = t.WhenUnsatisfiable
			if t.LabelSelector == nil || !selects(t.LabelSelector.MatchLabels, sts.Spec.Template.Labels) {
				fail("StatefulSet %s: topology spread over %s does not select its pods", name, t.TopologyKey)
			}
			if t.MaxSkew < 1 {
				fail("StatefulSet %s: topology spread over %s: maxSkew %d", name, t.TopologyKey, t.MaxSkew)
			}
		}
		for key, v := range map[string]string{"topology.kubernetes.io/zone": "topologySpread.zone.whenUnsatisfiable",
			"kubernetes.io/hostname": "topologySpread.hostname.whenUnsatisfiable"} {
			if w, ok := keys[key]; !ok || string(w) != value(vals, v) {
				fail("StatefulSet %s: no topology spread over %s with whenUnsatisfiable %v (%v)", name, key, value(vals, v), keys)
			}
		}
	} else if len(spec.TopologySpreadConstraints) > 0 {
		fail("StatefulSet %s: topology spread rendered with topologySpread.enabled false", name)
	}

	if len(spec.Containers) != 1 {
		return append(p, fmt.Sprintf("StatefulSet %s: %d containers, want 1", name, len(spec.Containers)))
	}
	c := spec.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if _, dup := env[e.Name]; dup {
			fail("StatefulSet %s: env %s set twice", name, e.Name)
		}
		env[e.Name] = e
		if n, ok := strings.CutPrefix(e.Name, "SLUICE_"); ok && flags != nil && !flags[flagOf(n)] {
			fail("StatefulSet %s: env %s is no `sluice serve` flag's twin", name, e.Name)
		}
	}
	limit, hasLimit := c.Resources.Limits[corev1.ResourceMemory]
	if !hasLimit {
		fail("StatefulSet %s: no resources.limits.memory", name)
	}
	// The store cap: store.maxBytes, or memoryPercent of the limit rounded
	// down to a MiB, computed here independently of the template.
	want, _ := value(vals, "store.maxBytes").(string)
	if want == "" && hasLimit {
		pct, _ := value(vals, "store.memoryPercent").(float64)
		want = fmt.Sprintf("%dMiB", limit.Value()*int64(pct)/100/(1<<20))
	}
	if got := env["SLUICE_STORE_MAX_BYTES"].Value; got != want {
		fail("StatefulSet %s: SLUICE_STORE_MAX_BYTES %q, want %q (from limits.memory %s)", name, got, want, limit.String())
	}
	if j := env["SLUICE_JOIN"].Value; j != name+"-gossip:7946" {
		fail("StatefulSet %s: SLUICE_JOIN %q, want the headless Service %s-gossip:7946", name, j, name)
	}
	pre := int64(0)
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		pre = c.Lifecycle.PreStop.Sleep.Seconds
	} else {
		fail("StatefulSet %s: no preStop sleep", name)
	}
	shutdown, err := resourceSeconds(env["SLUICE_SHUTDOWN_TIMEOUT"].Value)
	if err != nil {
		fail("StatefulSet %s: SLUICE_SHUTDOWN_TIMEOUT: %v", name, err)
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g < pre+shutdown {
		fail("StatefulSet %s: terminationGracePeriodSeconds %v < preStop %ds + shutdown %ds", name, g, pre, shutdown)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		fail("StatefulSet %s: no readiness probe on /readyz", name)
	}
	return p
}

// flagOf is the flag of a SLUICE_* variable's name without the prefix.
func flagOf(n string) string { return strings.ToLower(strings.ReplaceAll(n, "_", "-")) }

// resourceSeconds reads "30s".
func resourceSeconds(s string) (int64, error) {
	n, ok := strings.CutSuffix(s, "s")
	q, err := resource.ParseQuantity(n)
	if !ok || err != nil {
		return 0, fmt.Errorf("%q is not a number of seconds", s)
	}
	return q.Value(), nil
}

// checkOptional checks the PodDisruptionBudget, ServiceMonitor and
// NetworkPolicy: each rendered exactly when its values enable it, and
// pointing at the StatefulSet's pods.
func checkOptional(name string, o objects, client *corev1.Service, podLabels map[string]string, vals map[string]any) []string {
	var p []string
	fail := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	pdb := o.pdbs[name]
	if enabled(vals, "podDisruptionBudget.enabled") != (pdb != nil) || len(o.pdbs) > 1 {
		fail("PodDisruptionBudget %s rendered: %v, podDisruptionBudget.enabled: %v", name, pdb != nil, enabled(vals, "podDisruptionBudget.enabled"))
	}
	if pdb != nil {
		if pdb.Spec.Selector == nil || !selects(pdb.Spec.Selector.MatchLabels, podLabels) {
			fail("PodDisruptionBudget %s does not select the StatefulSet's pods", name)
		}
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
			fail("PodDisruptionBudget %s: maxUnavailable %v, want 1 (one handoff at a time)", name, pdb.Spec.MaxUnavailable)
		}
	}

	sm := o.serviceMonitors[name]
	if enabled(vals, "serviceMonitor.enabled") != (sm != nil) || len(o.serviceMonitors) > 1 {
		fail("ServiceMonitor %s rendered: %v, serviceMonitor.enabled: %v", name, sm != nil, enabled(vals, "serviceMonitor.enabled"))
	}
	if sm != nil && client != nil {
		sel, _ := value(sm, "spec.selector.matchLabels").(map[string]any)
		labels := map[string]string{}
		for k, v := range sel {
			labels[k], _ = v.(string)
		}
		if !selects(labels, client.Labels) {
			fail("ServiceMonitor %s does not select Service %s (%v)", name, name, sel)
		}
		for _, s := range o.services {
			if s != client && selects(labels, s.Labels) {
				fail("ServiceMonitor %s selects Service %s too: each pod would be scraped more than once", name, s.Name)
			}
		}
		eps, _ := value(sm, "spec.endpoints").([]any)
		ep, _ := func() (map[string]any, bool) {
			if len(eps) == 0 {
				return nil, false
			}
			m, ok := eps[0].(map[string]any)
			return m, ok
		}()
		if ep["port"] != "http" || ep["path"] != "/metrics" {
			fail("ServiceMonitor %s: endpoints %v, want port http path /metrics", name, eps)
		}
	}

	np := o.networkPolicies[name]
	if enabled(vals, "networkPolicy.enabled") != (np != nil) || len(o.networkPolicies) > 1 {
		fail("NetworkPolicy %s rendered: %v, networkPolicy.enabled: %v", name, np != nil, enabled(vals, "networkPolicy.enabled"))
	}
	if np != nil {
		if !selects(np.Spec.PodSelector.MatchLabels, podLabels) {
			fail("NetworkPolicy %s does not select the StatefulSet's pods", name)
		}
		peerOnly := map[int32]bool{8082: false, 7946: false}
		for _, rule := range np.Spec.Ingress {
			onlyPeers := len(rule.From) > 0
			for _, f := range rule.From {
				if f.PodSelector == nil || !selects(f.PodSelector.MatchLabels, podLabels) || f.NamespaceSelector != nil {
					onlyPeers = false
				}
			}
			for _, port := range rule.Ports {
				if _, ok := peerOnly[port.Port.IntVal]; !ok {
					if len(rule.From) == 0 {
						fail("NetworkPolicy %s admits anyone on port %d: want the namespace or networkPolicy.clientFrom", name, port.Port.IntVal)
					}
					continue
				}
				if !onlyPeers {
					fail("NetworkPolicy %s admits more than the nodes on port %d", name, port.Port.IntVal)
				}
				peerOnly[port.Port.IntVal] = true
			}
		}
		for port, seen := range peerOnly {
			if !seen {
				fail("NetworkPolicy %s: no rule admits the nodes on port %d", name, port)
			}
		}
	}
	return p
}
