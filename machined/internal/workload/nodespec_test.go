package workload

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-os/cairn/api/config"
)

// TestSpecPatch: what a control plane puts on a Node from the spec its node asks for, applied to the
// Node the way the API server applies a JSON merge patch (mergeNode), so the test checks the Node a user
// would see.
func TestSpecPatch(t *testing.T) {
	gpu := config.NodeTaint{Key: "dedicated", Value: "gpu", Effect: "NoSchedule"}
	notReady := corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}
	spec := func(labels map[string]string, taints ...config.NodeTaint) string {
		return nodeSpec{Labels: labels, Taints: taints}.encode()
	}
	tests := []struct {
		name        string
		annotations map[string]string
		labels      map[string]string
		taints      []corev1.Taint
		wantLabels  map[string]string
		wantTaints  []corev1.Taint
		unchanged   bool
		err         string
	}{
		{name: "a node that asks nothing", labels: map[string]string{"a": "1"}, wantLabels: map[string]string{"a": "1"}, unchanged: true},
		{
			name:        "first spec: labels and a taint put on, the others' kept",
			annotations: map[string]string{SpecAnnotation: spec(map[string]string{"rack": "r1", "node-role.kubernetes.io/gpu": ""}, gpu)},
			labels:      map[string]string{"kubernetes.io/hostname": "w1"},
			taints:      []corev1.Taint{notReady},
			wantLabels:  map[string]string{"kubernetes.io/hostname": "w1", "rack": "r1", "node-role.kubernetes.io/gpu": ""},
			wantTaints:  []corev1.Taint{notReady, {Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
		},
		{
			name: "already applied",
			annotations: map[string]string{SpecAnnotation: spec(map[string]string{"rack": "r1"}, gpu),
				AppliedAnnotation: spec(map[string]string{"rack": "r1"}, gpu)},
			labels:     map[string]string{"rack": "r1"},
			taints:     []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
			wantLabels: map[string]string{"rack": "r1"},
			wantTaints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
			unchanged:  true,
		},
		{
			name: "dropped from the config: taken off; put on by kubectl: kept",
			annotations: map[string]string{SpecAnnotation: spec(map[string]string{"rack": "r2"}),
				AppliedAnnotation: spec(map[string]string{"rack": "r1", "zone": "z1"}, gpu)},
			labels:     map[string]string{"rack": "r1", "zone": "z1", "team": "kubectl's"},
			taints:     []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, notReady},
			wantLabels: map[string]string{"rack": "r2", "team": "kubectl's"},
			wantTaints: []corev1.Taint{notReady},
		},
		{
			name:        "the last taint taken off",
			annotations: map[string]string{SpecAnnotation: spec(nil), AppliedAnnotation: spec(nil, gpu)},
			taints:      []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
		},
		{
			name:        "a taint's value changed",
			annotations: map[string]string{SpecAnnotation: spec(nil, config.NodeTaint{Key: "dedicated", Value: "tpu", Effect: "NoSchedule"}), AppliedAnnotation: spec(nil, gpu)},
			taints:      []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
			wantTaints:  []corev1.Taint{{Key: "dedicated", Value: "tpu", Effect: corev1.TaintEffectNoSchedule}},
		},
		{
			name:        "a label NodeRestriction keeps from nodes is refused whole",
			annotations: map[string]string{SpecAnnotation: spec(map[string]string{"node-restriction.kubernetes.io/trusted": "yes", "rack": "r1"})},
			err:         "node-restriction.kubernetes.io/trusted",
		},
		{
			name:        "a worker that asks to be taken for a control plane",
			annotations: map[string]string{SpecAnnotation: spec(map[string]string{"node-role.kubernetes.io/control-plane": ""})},
			err:         "marks control planes",
		},
		{
			name:        "a garbled spec",
			annotations: map[string]string{SpecAnnotation: "{labels"},
			err:         SpecAnnotation,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "w1", ResourceVersion: "7", Labels: tc.labels, Annotations: tc.annotations},
				Spec:       corev1.NodeSpec{Taints: tc.taints},
			}
			patch, err := specPatch(n)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("specPatch() error = %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (patch == nil) != tc.unchanged {
				t.Fatalf("specPatch() = %s, want a patch: %v", patch, !tc.unchanged)
			}
			if patch == nil {
				return
			}
			got := mergeNode(t, n, patch)
			if diff := cmp.Diff(tc.wantLabels, got.Labels); diff != "" {
				t.Errorf("labels after the patch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantTaints, got.Spec.Taints, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("taints after the patch (-want +got):\n%s", diff)
			}
			if got.Annotations[AppliedAnnotation] != tc.annotations[SpecAnnotation] {
				t.Errorf("applied annotation = %q, want the spec %q", got.Annotations[AppliedAnnotation], tc.annotations[SpecAnnotation])
			}
			if got.ResourceVersion != "7" {
				t.Errorf("the patch's resourceVersion precondition = %q, want the one read, 7", got.ResourceVersion)
			}
			// The patched Node asks for nothing more.
			if again, err := specPatch(got); err != nil || again != nil {
				t.Errorf("specPatch(patched Node) = %s, %v; want nothing left to do", again, err)
			}
		})
	}
}

// mergeNode applies a JSON merge patch (RFC 7396) to n as the API server would.
func mergeNode(t *testing.T, n corev1.Node, patch []byte) corev1.Node {
	t.Helper()
	var doc, p any
	data, _ := json.Marshal(n)
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		t.Fatalf("patch %s: %v", patch, err)
	}
	var merge func(dst, src any) any
	merge = func(dst, src any) any {
		s, ok := src.(map[string]any)
		if !ok {
			return src
		}
		d, ok := dst.(map[string]any)
		if !ok {
			d = map[string]any{}
		}
		for k, v := range s {
			if v == nil {
				delete(d, k)
			} else {
				d[k] = merge(d[k], v)
			}
		}
		return d
	}
	out, _ := json.Marshal(merge(doc, p))
	var got corev1.Node
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	return got
}
