package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/kubeapi"
)

// A node's labels and taints come from its machine config (machine.nodeLabels, machine.nodeTaints). A
// kubelet may not set most of them under NodeRestriction (no taints at all once registered, no labels in
// the kubernetes.io namespaces but a few), so the node writes what it asks for into an annotation on its
// own Node, which a kubelet may do, and a control plane puts it on the Node: at once for itself, at its
// next pass (every 30 s) for the others. A second annotation records what was applied, so a label or taint
// dropped from the config is taken off, and one put there by someone else (kubectl label) is left alone.

const (
	// SpecAnnotation holds the labels and taints the node's config asks for (JSON of nodeSpec).
	SpecAnnotation = "cairn.dev/node-spec"
	// AppliedAnnotation holds the nodeSpec a control plane last put on the Node.
	AppliedAnnotation = "cairn.dev/node-spec-applied"
)

// nodeSpecWait bounds how long a live apply waits for a control plane to apply the node's labels and
// taints: two of its passes.
const nodeSpecWait = 2 * namesInterval

// nodeSpec is what one config asks of its Node.
type nodeSpec struct {
	Labels map[string]string  `json:"labels,omitempty"`
	Taints []config.NodeTaint `json:"taints,omitempty"`
}

func specOf(c *config.MachineConfig) nodeSpec {
	return nodeSpec{Labels: c.Machine.NodeLabels, Taints: c.Machine.NodeTaints}
}

// encode is the annotation's value; encoding/json sorts the map's keys, so equal specs encode equally.
func (s nodeSpec) encode() string {
	data, _ := json.Marshal(s) // strings only: it cannot fail
	return string(data)
}

func decodeSpec(node, annotation, value string) (nodeSpec, error) {
	var s nodeSpec
	if value == "" {
		return s, nil
	}
	if err := json.Unmarshal([]byte(value), &s); err != nil {
		return s, fmt.Errorf("Node %s: annotation %s is not a node spec: %w", node, annotation, err)
	}
	return s, nil
}

// specPatch is the JSON merge patch that puts on n the labels and taints its SpecAnnotation asks for and
// takes off those its AppliedAnnotation says were put there before and are no longer asked for; nil when
// the Node already carries them. A spec with a label or taint a node may not ask for (a node sets the
// annotation itself) is refused whole, with the reason.
func specPatch(n corev1.Node) ([]byte, error) {
	value, ok := n.Annotations[SpecAnnotation]
	if !ok {
		return nil, nil // a node this config never managed (or older than this feature)
	}
	want, err := decodeSpec(n.Name, SpecAnnotation, value)
	if err != nil {
		return nil, err
	}
	for k, v := range want.Labels {
		if msg := config.CheckNodeLabel(k, v); msg != "" {
			return nil, fmt.Errorf("Node %s asks for label %s: %s", n.Name, k, msg)
		}
	}
	for _, t := range want.Taints {
		if msg := config.CheckNodeTaint(t); msg != "" {
			return nil, fmt.Errorf("Node %s asks for taint %s: %s", n.Name, t, msg)
		}
	}
	had, err := decodeSpec(n.Name, AppliedAnnotation, n.Annotations[AppliedAnnotation])
	if err != nil {
		had = nodeSpec{} // unreadable: take nothing off, put everything asked for on
	}

	labels := map[string]any{}
	for k := range had.Labels {
		if _, keep := want.Labels[k]; !keep {
			if _, on := n.Labels[k]; on {
				labels[k] = nil
			}
		}
	}
	for k, v := range want.Labels {
		if cur, on := n.Labels[k]; !on || cur != v {
			labels[k] = v
		}
	}

	taints := mergeTaints(n.Spec.Taints, had.Taints, want.Taints)
	taintsChanged := !slices.EqualFunc(taints, n.Spec.Taints, func(a, b corev1.Taint) bool {
		return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect
	})
	recorded := n.Annotations[AppliedAnnotation] == want.encode()
	if len(labels) == 0 && !taintsChanged && recorded {
		return nil, nil
	}
	meta := map[string]any{
		"annotations": map[string]any{AppliedAnnotation: want.encode()},
		// A precondition: a Node changed since it was read (the node lifecycle controller taints and
		// untaints it) fails the patch with a conflict, and the next pass reads it again.
		"resourceVersion": n.ResourceVersion,
	}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	patch := map[string]any{"metadata": meta}
	if taintsChanged {
		if taints == nil {
			taints = []corev1.Taint{} // null would not clear a merge patch's list
		}
		patch["spec"] = map[string]any{"taints": taints}
	}
	return json.Marshal(patch)
}

// mergeTaints is cur without the taints had put there that want drops, with want's put on (a taint is
// one per key and effect: want's value replaces another's). Taints nobody here put on stay, in order.
func mergeTaints(cur []corev1.Taint, had, want []config.NodeTaint) []corev1.Taint {
	same := func(t corev1.Taint, c config.NodeTaint) bool { return t.Key == c.Key && string(t.Effect) == c.Effect }
	var out []corev1.Taint
	for _, t := range cur {
		dropped := slices.ContainsFunc(had, func(c config.NodeTaint) bool { return same(t, c) }) &&
			!slices.ContainsFunc(want, func(c config.NodeTaint) bool { return same(t, c) })
		if !dropped {
			out = append(out, t)
		}
	}
	for _, c := range want {
		t := corev1.Taint{Key: c.Key, Value: c.Value, Effect: corev1.TaintEffect(c.Effect)}
		if i := slices.IndexFunc(out, func(t corev1.Taint) bool { return same(t, c) }); i >= 0 {
			out[i] = t
		} else {
			out = append(out, t)
		}
	}
	return out
}

// publishNodeSpec writes what the node's config asks of its Node into the Node's annotation (the
// node-labels task, and a live apply); a control plane applies it to itself at once. A node whose config
// never asked for labels or taints and whose Node carries no such annotation has nothing to say.
func (w *Workload) publishNodeSpec(ctx context.Context) error {
	c := w.config()
	if c == nil {
		return nil
	}
	cli, err := w.nodeClient()
	if err != nil {
		return err
	}
	name, _ := w.Identity()
	path := "/api/v1/nodes/" + url.PathEscape(name)
	spec := specOf(c)
	var n corev1.Node
	if err := cli.Get(ctx, path, &n); err != nil {
		return fmt.Errorf("read Node %s: %w", name, err)
	}
	if _, had := n.Annotations[SpecAnnotation]; !had && len(spec.Labels) == 0 && len(spec.Taints) == 0 {
		return nil
	}
	asked := n.Annotations[SpecAnnotation] != spec.encode()
	if asked {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{SpecAnnotation: spec.encode()}}})
		if err := cli.Patch(ctx, path, patch); err != nil {
			return fmt.Errorf("ask for the Node's labels and taints on Node %s: %w", name, err)
		}
	}
	if !w.controlPlane() {
		return nil
	}
	// A control plane applies it to itself at once (cli is the admin here), from the Node as it is now.
	if asked {
		if err := cli.Get(ctx, path, &n); err != nil {
			return fmt.Errorf("read Node %s: %w", name, err)
		}
	}
	w.applyNodeSpecs(ctx, cli, []corev1.Node{n})
	return nil
}

// waitNodeSpec waits until a control plane has applied what the node asked for (a live apply reports it
// in effect only then).
func (w *Workload) waitNodeSpec(ctx context.Context) error {
	c := w.config()
	cli, err := w.nodeClient()
	if err != nil || c == nil {
		return err
	}
	name, _ := w.Identity()
	want := specOf(c).encode()
	ctx, cancel := context.WithTimeout(ctx, nodeSpecWait)
	defer cancel()
	var got string
	err = kubeapi.Poll(ctx, 2*time.Second, func(ctx context.Context) error {
		var n corev1.Node
		if err := cli.Get(ctx, "/api/v1/nodes/"+url.PathEscape(name), &n); err != nil {
			return err
		}
		if got = n.Annotations[AppliedAnnotation]; got != want {
			return fmt.Errorf("Node %s carries %s, wants %s", name, orNone(got), want)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("no control plane applied the node's labels and taints within %v (a control plane applies them every %v; see its log): %w",
			nodeSpecWait, namesInterval, err)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none yet"
	}
	return s
}

// applyNodeSpecs puts on the Nodes what their nodes asked for (a control plane's pass, nodePass).
func (w *Workload) applyNodeSpecs(ctx context.Context, c *kubeapi.Client, nodes []corev1.Node) {
	for _, n := range nodes {
		patch, err := specPatch(n)
		if err != nil {
			w.Log.Warn("node labels and taints not applied", "node", n.Name, "error", err)
			continue
		}
		if patch == nil {
			continue
		}
		if err := c.Patch(ctx, "/api/v1/nodes/"+url.PathEscape(n.Name), patch); err != nil {
			w.Log.Warn("apply the node's labels and taints; the next pass tries again", "node", n.Name, "error", err)
			continue
		}
		w.Log.Info("applied the labels and taints the node's config asks for", "node", n.Name, "spec", n.Annotations[SpecAnnotation])
	}
}
