package main

import (
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// secretsCluster serves Helm's lookup from client-go's in-memory dynamic
// client holding the given Secrets: the cluster an upgrade renders against.
type secretsCluster struct {
	client *dynamicfake.FakeDynamicClient
}

func (c secretsCluster) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	return c.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}), true, nil
}

func newSecretsCluster(t *testing.T, secrets ...*corev1.Secret) secretsCluster {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	objs := make([]runtime.Object, len(secrets))
	for i, s := range secrets {
		objs[i] = s
	}
	return secretsCluster{dynamicfake.NewSimpleDynamicClient(scheme, objs...)}
}

// TestClusterSecretKeptAcrossUpgrades renders the chart as an upgrade does,
// with Helm's lookup reading a cluster that holds the generated Secret, and
// expects its value back; against an empty cluster (an install), a new one.
func TestClusterSecretKeptAcrossUpgrades(t *testing.T) {
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	vs := valueSet{name: "upgrade", release: "sluice"}
	const name, key = "sluice-cluster-secret", "cluster-secret"
	secretOf := func(c secretsCluster) string {
		t.Helper()
		files, err := render(chartDir, vs, kv, c)
		if err != nil {
			t.Fatal(err)
		}
		o, problems := decode(files)
		if len(problems) > 0 || o.secrets[name] == nil {
			t.Fatalf("problems %q, Secret %s rendered: %v", problems, name, o.secrets[name] != nil)
		}
		return string(o.secrets[name].Data[key])
	}
	installed := secretOf(newSecretsCluster(t))
	if len(installed) != 48 {
		t.Fatalf("a new install's secret %q: want 48 characters", installed)
	}
	if again := secretOf(newSecretsCluster(t)); again == installed {
		t.Errorf("two installs made the same secret %q", again)
	}
	old := "an-existing-secret-of-at-least-32-bytes-0123456789"
	got := secretOf(newSecretsCluster(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "sluice-system"},
		Data:       map[string][]byte{key: []byte(old)},
	}))
	if got != old {
		t.Errorf("upgrade: secret %q, want the existing %q kept", got, old)
	}
}
