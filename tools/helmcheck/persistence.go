package main

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// checkPersistence checks the data directory (persistence): with it on,
// as it is by default, one volumeClaimTemplate of persistence.size (and
// storageClass, if set) mounted where SLUICE_DATA_DIR points, writable by
// the pod's fsGroup (the root filesystem is read-only), and the sync
// interval passed; with it off, neither claim nor SLUICE_DATA_DIR.
func checkPersistence(name string, sts *appsv1.StatefulSet, vals map[string]any) []string {
	var p []string
	fail := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	on := enabled(vals, "persistence.enabled")
	spec := sts.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		return p
	}
	c := spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	dir, hasDir := env["SLUICE_DATA_DIR"]
	if !on {
		if hasDir || len(sts.Spec.VolumeClaimTemplates) > 0 {
			fail("StatefulSet %s: SLUICE_DATA_DIR %q or %d volumeClaimTemplates with persistence.enabled false", name, dir, len(sts.Spec.VolumeClaimTemplates))
		}
		return p
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 {
		return append(p, fmt.Sprintf("StatefulSet %s: %d volumeClaimTemplates with persistence.enabled, want 1", name, len(sts.Spec.VolumeClaimTemplates)))
	}
	claim := sts.Spec.VolumeClaimTemplates[0]
	size, _ := value(vals, "persistence.size").(string)
	want, err := resource.ParseQuantity(size)
	if got, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]; err != nil || !ok || got.Cmp(want) != 0 {
		fail("StatefulSet %s: claim %s requests storage %v, want persistence.size %q", name, claim.Name, claim.Spec.Resources.Requests.Storage(), size)
	}
	class, _ := value(vals, "persistence.storageClass").(string)
	if got := claim.Spec.StorageClassName; class != "" && (got == nil || *got != class) || class == "" && got != nil {
		fail("StatefulSet %s: claim %s storageClassName %v, want persistence.storageClass %q (empty: the default class)", name, claim.Name, got, class)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.Name == claim.Name && m.MountPath == dir && !m.ReadOnly {
			mounted = true
		}
	}
	if !hasDir || !mounted {
		fail("StatefulSet %s: SLUICE_DATA_DIR=%s is not where the claim %s is mounted writable (the root filesystem is read-only)", name, dir, claim.Name)
	}
	for _, v := range spec.Volumes {
		if v.Name == claim.Name {
			fail("StatefulSet %s: pod volume %s hides the claim of the same name", name, v.Name)
		}
	}
	if sc := spec.SecurityContext; sc == nil || sc.FSGroup == nil || sc.RunAsGroup == nil || *sc.FSGroup != *sc.RunAsGroup {
		fail("StatefulSet %s: the pod's fsGroup is not its runAsGroup: the node could not write its volume", name)
	}
	if iv, _ := value(vals, "persistence.syncInterval").(string); strings.TrimSpace(env["SLUICE_DATA_SYNC_INTERVAL"]) != iv {
		fail("StatefulSet %s: SLUICE_DATA_SYNC_INTERVAL %q, want persistence.syncInterval %q", name, env["SLUICE_DATA_SYNC_INTERVAL"], iv)
	}
	return p
}
