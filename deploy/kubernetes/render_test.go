// Package kubernetes holds deploy/kubernetes (a kustomize base and its overlays); its
// tests render each overlay, decode every object strictly and check the manifests against
// the binaries they run.
package kubernetes

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"
)

var overlays = []string{"dev", "production"}

// KafkaTopic is the part of Strimzi's kafka.strimzi.io/v1beta2 KafkaTopic these manifests
// may use; strict decoding rejects any other field.
type KafkaTopic struct {
	v1.TypeMeta `json:",inline"`
	Metadata    v1.ObjectMeta `json:"metadata"`
	Spec        struct {
		TopicName  string         `json:"topicName"`
		Partitions int32          `json:"partitions"`
		Replicas   int32          `json:"replicas"`
		Config     map[string]any `json:"config"`
	} `json:"spec"`
}

// ServiceMonitor is the part of the Prometheus Operator's monitoring.coreos.com/v1
// ServiceMonitor these manifests may use.
type ServiceMonitor struct {
	v1.TypeMeta `json:",inline"`
	Metadata    v1.ObjectMeta `json:"metadata"`
	Spec        struct {
		Selector          v1.LabelSelector `json:"selector"`
		NamespaceSelector *struct {
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector,omitempty"`
		Endpoints []struct {
			Port        string `json:"port"`
			Path        string `json:"path"`
			Interval    string `json:"interval"`
			HonorLabels bool   `json:"honorLabels,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// KafkaUser is the part of Strimzi's kafka.strimzi.io/v1beta2 KafkaUser these manifests may
// use: a SCRAM-SHA-512 user and its ACLs.
type KafkaUser struct {
	v1.TypeMeta `json:",inline"`
	Metadata    v1.ObjectMeta `json:"metadata"`
	Spec        struct {
		Authentication struct {
			Type string `json:"type"`
		} `json:"authentication"`
		Authorization struct {
			Type string `json:"type"`
			ACLs []struct {
				Resource struct {
					Type        string `json:"type"`
					Name        string `json:"name,omitempty"`
					PatternType string `json:"patternType,omitempty"`
				} `json:"resource"`
				Operations []string `json:"operations"`
				Host       string   `json:"host,omitempty"`
			} `json:"acls"`
		} `json:"authorization"`
	} `json:"spec"`
}

// objects is an overlay's rendering, decoded.
type objects struct {
	Namespaces      []corev1.Namespace
	ConfigMaps      map[string]corev1.ConfigMap // by name (with the generator's hash)
	Services        map[string]corev1.Service
	Deployments     map[string]appsv1.Deployment
	PDBs            map[string]policyv1.PodDisruptionBudget
	NetworkPolicies map[string]networkingv1.NetworkPolicy
	Topics          []KafkaTopic
	Users           map[string]KafkaUser
	Monitors        []ServiceMonitor
}

// render runs kustomize (its Go API: what `kubectl kustomize` runs, without a binary)
// on overlays/<name>.
func render(t *testing.T, overlay string) []byte {
	t.Helper()
	return renderDir(t, "overlays/"+overlay)
}

// renderDir runs kustomize on a directory.
func renderDir(t *testing.T, dir string) []byte {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decodeStrict decodes one YAML object into v as the API server's strict field validation
// does: an unknown or duplicate field is an error.
func decodeStrict(doc []byte, v any) error {
	j, err := sigsyaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	strict, err := json.UnmarshalStrict(j, v, json.DisallowUnknownFields, json.DisallowDuplicateFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// decodeAll splits a rendering into its objects and decodes each strictly into its
// k8s.io/api type (or the small CRD types above); an object of another kind is an error.
func decodeAll(t *testing.T, rendered []byte) objects {
	t.Helper()
	o := objects{ConfigMaps: map[string]corev1.ConfigMap{}, Services: map[string]corev1.Service{},
		Deployments: map[string]appsv1.Deployment{}, PDBs: map[string]policyv1.PodDisruptionBudget{},
		NetworkPolicies: map[string]networkingv1.NetworkPolicy{}, Users: map[string]KafkaUser{}}
	dec := yaml.NewDecoder(bytes.NewReader(rendered))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		doc, err := yaml.Marshal(&n)
		if err != nil {
			t.Fatal(err)
		}
		var tm v1.TypeMeta
		if err := sigsyaml.Unmarshal(doc, &tm); err != nil {
			t.Fatal(err)
		}
		kind := tm.APIVersion + "/" + tm.Kind
		var derr error
		switch kind {
		case "v1/Namespace":
			var x corev1.Namespace
			derr = decodeStrict(doc, &x)
			o.Namespaces = append(o.Namespaces, x)
		case "v1/ConfigMap":
			var x corev1.ConfigMap
			derr = decodeStrict(doc, &x)
			o.ConfigMaps[x.Name] = x
		case "v1/Service":
			var x corev1.Service
			derr = decodeStrict(doc, &x)
			o.Services[x.Name] = x
		case "apps/v1/Deployment":
			var x appsv1.Deployment
			derr = decodeStrict(doc, &x)
			o.Deployments[x.Name] = x
		case "policy/v1/PodDisruptionBudget":
			var x policyv1.PodDisruptionBudget
			derr = decodeStrict(doc, &x)
			o.PDBs[x.Name] = x
		case "networking.k8s.io/v1/NetworkPolicy":
			var x networkingv1.NetworkPolicy
			derr = decodeStrict(doc, &x)
			o.NetworkPolicies[x.Name] = x
		case "kafka.strimzi.io/v1beta2/KafkaTopic":
			var x KafkaTopic
			derr = decodeStrict(doc, &x)
			o.Topics = append(o.Topics, x)
		case "kafka.strimzi.io/v1beta2/KafkaUser":
			var x KafkaUser
			derr = decodeStrict(doc, &x)
			o.Users[x.Metadata.Name] = x
		case "monitoring.coreos.com/v1/ServiceMonitor":
			var x ServiceMonitor
			derr = decodeStrict(doc, &x)
			o.Monitors = append(o.Monitors, x)
		default:
			t.Errorf("unexpected object %s", kind)
			continue
		}
		if derr != nil {
			t.Errorf("%s: %v\n%s", kind, derr, doc)
		}
	}
	return o
}

// TestStrictDecoding: the decoder the tests rely on refuses what the API server would.
func TestStrictDecoding(t *testing.T) {
	for _, tc := range []struct {
		doc string
		v   any
	}{
		{"apiVersion: apps/v1\nkind: Deployment\nspec:\n  replica: 3\n", &appsv1.Deployment{}},
		{"apiVersion: v1\nkind: Service\nspec:\n  clusterIp: None\n", &corev1.Service{}},
		{"apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaTopic\nspec:\n  partition: 1\n", &KafkaTopic{}},
		{"apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nspec:\n  endpoints: [{port: http, scheme: https}]\n", &ServiceMonitor{}},
		{"apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaUser\nspec:\n  authorization: {acls: [{resource: {type: topic}, operation: Read}]}\n", &KafkaUser{}},
		{"apiVersion: v1\nkind: ConfigMap\ndata: {a: x}\ndata: {b: y}\n", &corev1.ConfigMap{}},
	} {
		if err := decodeStrict([]byte(tc.doc), tc.v); err == nil {
			t.Errorf("accepted %q", tc.doc)
		}
	}
	var d appsv1.Deployment
	if err := decodeStrict([]byte("apiVersion: apps/v1\nkind: Deployment\nspec:\n  replicas: 3\n"), &d); err != nil || *d.Spec.Replicas != 3 {
		t.Fatalf("a valid Deployment: %v", err)
	}
}

// configOf returns the ConfigMap the Deployment's pod mounts at dir and the file name
// args passes to -config (the rendered name carries the generator's hash).
func configOf(t *testing.T, o objects, d appsv1.Deployment) (corev1.ConfigMap, string, corev1.VolumeMount) {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	var path string
	for i, a := range c.Args {
		if a == "-config" && i+1 < len(c.Args) {
			path = c.Args[i+1]
		}
	}
	for _, m := range c.VolumeMounts {
		if !strings.HasPrefix(path, m.MountPath+"/") {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				cm, ok := o.ConfigMaps[v.ConfigMap.Name]
				if !ok {
					t.Fatalf("%s mounts ConfigMap %s, which is not in the rendering", d.Name, v.ConfigMap.Name)
				}
				key := strings.TrimPrefix(path, m.MountPath+"/")
				if _, ok := cm.Data[key]; !ok {
					t.Fatalf("%s: -config %s, but ConfigMap %s has no %s", d.Name, path, cm.Name, key)
				}
				return cm, key, m
			}
		}
	}
	t.Fatalf("%s: -config %q is not in a mounted ConfigMap", d.Name, path)
	return corev1.ConfigMap{}, "", corev1.VolumeMount{}
}
