package render

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

// inputs are the objects render plans from, deduplicated.
type inputs struct {
	servers    []*clerumv1alpha1.McpServer
	contexts   []*clerumv1alpha1.Context
	hosts      []*clerumv1alpha1.Host
	sfs        []*clerumv1alpha1.SharedFileSystem
	gfs        []*clerumv1alpha1.GlobalFileSystem
	secrets    []*corev1.Secret
	configMaps []*corev1.ConfigMap
}

// document is one YAML document and where it came from.
type document struct {
	source string // "path#index"
	raw    []byte // JSON
	typ    metav1.TypeMeta
}

// objectKey identifies an object for deduplication.
type objectKey struct{ apiVersion, kind, namespace, name string }

// loader reads files into inputs, placing objects without a namespace in the
// namespace HCC watches for their kind.
type loader struct {
	defaultNamespace func(kind string) string
	note             func(format string, args ...any)

	seen map[objectKey]seenObject
	in   inputs
}

type seenObject struct {
	source string
	body   []byte // canonical JSON of the decoded object
}

// load reads every path: a file, or a folder walked recursively for .yaml
// and .yml files in lexical order.
func (l *loader) load(paths []string) (*inputs, error) {
	l.seen = map[objectKey]seenObject{}
	for _, p := range paths {
		files, err := yamlFiles(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if err := l.loadFile(f); err != nil {
				return nil, err
			}
		}
	}
	return &l.in, nil
}

func yamlFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(p); !d.IsDir() && (ext == ".yaml" || ext == ".yml") {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

func (l *loader) loadFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for i := 0; ; i++ {
		chunk, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		raw, err := yaml.YAMLToJSON(chunk)
		if err != nil {
			return fmt.Errorf("%s document %d: %w", path, i+1, err)
		}
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue // an empty document, or only comments
		}
		doc := document{source: fmt.Sprintf("%s document %d", path, i+1), raw: raw}
		if err := json.Unmarshal(raw, &doc.typ); err != nil {
			return fmt.Errorf("%s: %w", doc.source, err)
		}
		if err := l.add(doc); err != nil {
			return err
		}
	}
}

// add decodes one document into its typed object; a v1 List is unpacked.
func (l *loader) add(doc document) error {
	gv, kind := doc.typ.APIVersion, doc.typ.Kind
	if kind == "" || gv == "" {
		return fmt.Errorf("%s: apiVersion and kind are required", doc.source)
	}
	switch {
	case gv == "v1" && kind == "List":
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(doc.raw, &list); err != nil {
			return fmt.Errorf("%s: %w", doc.source, err)
		}
		for i, item := range list.Items {
			sub := document{source: fmt.Sprintf("%s item %d", doc.source, i+1), raw: item}
			if err := json.Unmarshal(item, &sub.typ); err != nil {
				return fmt.Errorf("%s: %w", sub.source, err)
			}
			if err := l.add(sub); err != nil {
				return err
			}
		}
		return nil
	case gv == clerumv1alpha1.GroupVersion.String():
		switch kind {
		case "McpServer":
			return decodeInto(l, doc, &l.in.servers)
		case "Context":
			return decodeInto(l, doc, &l.in.contexts)
		case "Host":
			return decodeInto(l, doc, &l.in.hosts)
		case "SharedFileSystem":
			return decodeInto(l, doc, &l.in.sfs)
		case "GlobalFileSystem":
			return decodeInto(l, doc, &l.in.gfs)
		}
	case gv == "v1" && kind == "Secret":
		return decodeInto(l, doc, &l.in.secrets)
	case gv == "v1" && kind == "ConfigMap":
		return decodeInto(l, doc, &l.in.configMaps)
	}
	l.note("skipping %s %s (%s): render does not use this kind", gv, kind, doc.source)
	return nil
}

// decodeInto decodes doc strictly (an unknown field is bad input, as
// kubectl's strict field validation would make it) and appends it to list
// unless an identical object came before.
func decodeInto[T any, PT interface {
	*T
	metav1.Object
}](l *loader, doc document, list *[]PT) error {
	o := PT(new(T))
	dec := json.NewDecoder(bytes.NewReader(doc.raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(o); err != nil {
		return fmt.Errorf("%s: %s: %w", doc.source, doc.typ.Kind, err)
	}
	if o.GetName() == "" {
		return fmt.Errorf("%s: %s without metadata.name", doc.source, doc.typ.Kind)
	}
	if o.GetNamespace() == "" {
		o.SetNamespace(l.defaultNamespace(doc.typ.Kind))
	}
	if s, ok := any(o).(*corev1.Secret); ok {
		mergeStringData(s)
	}
	body, err := json.Marshal(o)
	if err != nil {
		return err
	}
	key := objectKey{doc.typ.APIVersion, doc.typ.Kind, o.GetNamespace(), o.GetName()}
	if prev, ok := l.seen[key]; ok {
		if bytes.Equal(prev.body, body) {
			return nil // the same object given twice, e.g. a file and its folder
		}
		return fmt.Errorf("two different %s %s/%s: %s and %s", key.kind, key.namespace, key.name, prev.source, doc.source)
	}
	l.seen[key] = seenObject{source: doc.source, body: body}
	*list = append(*list, o)
	return nil
}

// mergeStringData folds stringData into data, as the API server does on
// write, so a Secret reads the same from a file as from a cluster.
func mergeStringData(s *corev1.Secret) {
	if len(s.StringData) == 0 {
		return
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
}
