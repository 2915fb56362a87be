package config

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Parse decodes a machine config strictly: unknown fields, a wrong apiVersion or kind, and an empty document
// are errors. It does not validate values; call Validate for that. Every unknown field is reported, each with
// its path, so a user fixes them all in one round.
func Parse(data []byte) (*MachineConfig, error) {
	var root yaml.Node
	if err := decodeOne(data, &root); err != nil {
		return nil, err
	}
	var errs Errors
	checkHeader(&root, APIVersion, KindMachineConfig, &errs)
	unknownFields(&root, reflect.TypeFor[MachineConfig](), "", &errs)
	if len(errs) > 0 {
		return nil, errs
	}
	var cfg MachineConfig
	if err := root.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("decode machine config: %w", err)
	}
	return &cfg, nil
}

// ParseSecrets decodes a secrets.yaml strictly.
func ParseSecrets(data []byte) (*Secrets, error) {
	var root yaml.Node
	if err := decodeOne(data, &root); err != nil {
		return nil, err
	}
	var errs Errors
	checkHeader(&root, APIVersion, KindSecrets, &errs)
	unknownFields(&root, reflect.TypeFor[Secrets](), "", &errs)
	if len(errs) > 0 {
		return nil, errs
	}
	var s Secrets
	if err := root.Decode(&s); err != nil {
		return nil, fmt.Errorf("decode secrets: %w", err)
	}
	return &s, nil
}

// Marshal writes a document as YAML.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func decodeOne(data []byte, root *yaml.Node) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("the config is empty")
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(root); err != nil {
		return fmt.Errorf("the config is not valid YAML: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return errors.New("the config holds more than one YAML document; give one per file")
	}
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return errors.New("the config must be a YAML mapping starting with apiVersion and kind")
	}
	return nil
}

func checkHeader(root *yaml.Node, apiVersion, kind string, errs *Errors) {
	m := root.Content[0]
	got := map[string]string{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		got[m.Content[i].Value] = m.Content[i+1].Value
	}
	if got["apiVersion"] != apiVersion {
		errs.add("apiVersion", "must be %q, got %q", apiVersion, got["apiVersion"])
	}
	if got["kind"] != kind {
		errs.add("kind", "must be %q, got %q", kind, got["kind"])
	}
}

// unknownFields walks the YAML tree beside the Go type and reports every key the type does not have.
func unknownFields(n *yaml.Node, t reflect.Type, path string, errs *Errors) {
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			unknownFields(c, t, path, errs)
		}
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return // a scalar such as `ephemeral: tmpfs` is checked by the type's own decoder
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			ft, ok := fields[key]
			if !ok {
				errs.add(join(path, key), "unknown field (line %d)", n.Content[i].Line)
				continue
			}
			unknownFields(n.Content[i+1], ft, join(path, key), errs)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			unknownFields(n.Content[i+1], t.Elem(), fmt.Sprintf("%s[%q]", path, n.Content[i].Value), errs)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, c := range n.Content {
			unknownFields(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	}
}

// yamlFields maps YAML keys to field types, flattening inline structs.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if strings.Contains(opts, "inline") {
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
