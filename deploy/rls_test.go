package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/rls"
)

// volumeMounts maps each mount path of a container to its volume's name.
func volumeMounts(t *testing.T, c doc) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range c.get("volumeMounts").([]any) {
		md := doc(m.(map[string]any))
		out[md.get("mountPath").(string)] = md.get("name").(string)
	}
	return out
}

func containerEnv(c doc) map[string]string {
	env := map[string]string{}
	for _, e := range c.get("env").([]any) {
		m := e.(map[string]any)
		if v, ok := m["value"].(string); ok {
			env[m["name"].(string)] = v
		}
	}
	return env
}

// The RLS ConfigMap is mounted where SLUICE_RLS_CONFIG points, optional,
// beside (not inside) the policies' mount, and its files load as the
// Envoy rate limit service loads them.
func TestKubernetesRLSConfig(t *testing.T) {
	byName := map[string]doc{}
	k := load(t, "kubernetes/kustomization.yaml")
	for _, r := range k.get("resources").([]any) {
		d := load(t, filepath.Join("kubernetes", r.(string)))
		byName[d.get("kind").(string)+"/"+d.get("metadata.name").(string)] = d
	}
	cm := byName["ConfigMap/sluice-rls"]
	if cm == nil {
		t.Fatal("no ConfigMap sluice-rls in the kustomization")
	}
	data, _ := cm.get("data").(map[string]any)
	var files []rls.File
	for name, text := range data {
		files = append(files, rls.File{Name: name, Data: []byte(text.(string))})
	}
	cfg, err := rls.Parse(files, rls.Options{})
	if err != nil || len(cfg.Domains()) == 0 {
		t.Fatalf("ConfigMap sluice-rls: %v (domains %v)", err, cfg)
	}
	if len(cfg.Warnings) > 0 {
		t.Errorf("ConfigMap sluice-rls: warnings %v", cfg.Warnings)
	}
	compose, err := os.ReadFile("compose/rls/edge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if data["edge.yaml"] != string(compose) {
		t.Errorf("ConfigMap sluice-rls edge.yaml differs from compose/rls/edge.yaml: keep the two examples one file")
	}

	sts := byName["StatefulSet/sluice"]
	c := doc(sts.get("spec.template.spec.containers.0").(map[string]any))
	env, mounts := containerEnv(c), volumeMounts(t, c)
	vols := map[string]doc{}
	for _, v := range sts.get("spec.template.spec.volumes").([]any) {
		vd := doc(v.(map[string]any))
		vols[vd.get("name").(string)] = vd
	}
	path := env["SLUICE_RLS_CONFIG"]
	vol := vols[mounts[path]]
	if vol == nil {
		t.Fatalf("SLUICE_RLS_CONFIG = %q is not a volume's mount path (mounts %v)", path, mounts)
	}
	want(t, vol, "configMap.name", "sluice-rls")
	want(t, vol, "configMap.optional", true)
	for m := range mounts {
		if m != path && (strings.HasPrefix(path, m+"/") || strings.HasPrefix(m, path+"/")) {
			t.Errorf("mount %s and %s nest: a mount inside a read-only ConfigMap volume cannot be created", m, path)
		}
	}
	if p := env["SLUICE_CONFIG"]; vols[mounts[filepath.Dir(p)]] == nil {
		t.Errorf("SLUICE_CONFIG = %q is not in a volume's mount (mounts %v)", p, mounts)
	}

	svc := byName["Service/sluice-rls"]
	if svc == nil {
		t.Fatal("no Service sluice-rls (headless, for Envoy's STRICT_DNS cluster)")
	}
	want(t, svc, "spec.clusterIP", "None")
	want(t, svc, "spec.ports.0.port", 8081)
	if svc.get("spec.publishNotReadyAddresses") == true {
		t.Error("sluice-rls publishes pods that are not ready")
	}

	// Without the ConfigMap (optional), the mount is an empty directory:
	// it loads, with no domain.
	if empty, err := rls.Load(t.TempDir(), rls.Options{}); err != nil || len(empty.Domains()) != 0 {
		t.Errorf("an empty directory: %v, %v", err, empty)
	}
}

// Every compose service mounts a directory of RLS rules where
// SLUICE_RLS_CONFIG points, and the directory loads.
func TestComposeRLSConfig(t *testing.T) {
	d := load(t, "compose/compose.yaml")
	for name, s := range d.get("services").(map[string]any) {
		sd := doc(s.(map[string]any))
		path, _ := sd.get("environment.SLUICE_RLS_CONFIG").(string)
		if path == "" {
			t.Errorf("%s: no SLUICE_RLS_CONFIG", name)
			continue
		}
		var host string
		vols, _ := sd.get("volumes").([]any)
		for _, v := range vols {
			parts := strings.Split(v.(string), ":")
			if len(parts) >= 2 && parts[1] == path {
				host = parts[0]
			}
		}
		if host == "" {
			t.Errorf("%s: SLUICE_RLS_CONFIG = %q is no volume's target (volumes %v)", name, path, vols)
			continue
		}
		cfg, err := rls.Load(filepath.Join("compose", host), rls.Options{})
		if err != nil || len(cfg.Domains()) == 0 {
			t.Errorf("%s: %s: %v (%v)", name, host, err, cfg)
		}
	}
}
