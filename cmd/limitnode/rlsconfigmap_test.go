package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestEnvoyPagesConfigMapIsFollowed takes the ConfigMap and the pod
// template of docs/envoy.md's Kubernetes section as they are: the template
// mounts that ConfigMap as a directory, not a subPath, where its
// -rls-config names it (flags the node accepts), and the ConfigMap, laid
// out as the kubelet mounts it, reads as the domains it holds, each valid.
func TestEnvoyPagesConfigMapIsFollowed(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile(filepath.Join(repoRoot, "docs", "envoy.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(page), "### In Kubernetes: a ConfigMap\n")
	if !ok {
		t.Fatal("docs/envoy.md has no section In Kubernetes: a ConfigMap")
	}
	blocks := strings.Split(section, "```yaml\n")
	if len(blocks) < 3 {
		t.Fatalf("the section has %d yaml blocks, want the ConfigMap and the pod template", len(blocks)-1)
	}
	block := func(i int) []byte { text, _, _ := strings.Cut(blocks[i], "```"); return []byte(text) }

	var configMap struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(block(1), &configMap); err != nil || configMap.Kind != "ConfigMap" || len(configMap.Data) == 0 {
		t.Fatalf("the first block is not a ConfigMap with data (%v):\n%s", err, block(1))
	}
	var pod struct {
		Containers []struct {
			Args         []string `yaml:"args"`
			VolumeMounts []struct {
				Name      string `yaml:"name"`
				MountPath string `yaml:"mountPath"`
				SubPath   string `yaml:"subPath"`
			} `yaml:"volumeMounts"`
		} `yaml:"containers"`
		Volumes []struct {
			Name      string `yaml:"name"`
			ConfigMap struct {
				Name string `yaml:"name"`
			} `yaml:"configMap"`
		} `yaml:"volumes"`
	}
	if err := yaml.Unmarshal(block(2), &pod); err != nil || len(pod.Containers) != 1 {
		t.Fatalf("the second block is not a pod template of one container (%v):\n%s", err, block(2))
	}
	ctr := pod.Containers[0]
	c, err := parseConfig(ctr.Args, env(nil), &strings.Builder{})
	if err != nil {
		t.Fatalf("the container's args %q: %v", ctr.Args, err)
	}
	mounted := false
	for _, m := range ctr.VolumeMounts {
		i := slices.IndexFunc(pod.Volumes, func(v struct {
			Name      string `yaml:"name"`
			ConfigMap struct {
				Name string `yaml:"name"`
			} `yaml:"configMap"`
		}) bool {
			return v.Name == m.Name
		})
		if i >= 0 && pod.Volumes[i].ConfigMap.Name == configMap.Metadata.Name && m.MountPath == c.rlsConfig && m.SubPath == "" {
			mounted = true
		}
	}
	if !mounted {
		t.Fatalf("-rls-config %s is not where the pod mounts ConfigMap %s as a directory", c.rlsConfig, configMap.Metadata.Name)
	}

	dir := t.TempDir()
	(&configMapMount{t: t, dir: dir}).write(configMap.Data)
	configs, err := readRLSConfigs(dir)
	if err != nil {
		t.Fatalf("the ConfigMap, mounted: %v", err)
	}
	if len(configs) != len(configMap.Data) {
		t.Fatalf("%d domains read of the ConfigMap's %d keys", len(configs), len(configMap.Data))
	}
}
