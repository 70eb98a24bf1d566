package manifest

import "testing"

// FuzzParse parses arbitrary manifests (YAML or JSON, several documents):
// no panic, and every object it returns has a kind.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"kind: Compute\nname: web\nspec:\n  flavor: small\n  compute:\n    image: busybox\n",
		"kind: Flavor\nname: small\nproviderKind: container\nspec:\n  vcpus: 0.5\n  memoryMiB: 256\n---\nkind: Region\nname: eu\nendpoint: a:1\n",
		`{"kind":"Volume","name":"v","spec":{"volume":{"sizeMiB":1}}}`,
		"kind: Compute\nname: web\nname: again\n",
		"- a\n- b\n", "&a [*a, *a]", "kind: [", "\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		objs, err := Parse("f.yaml", []byte(s))
		if err != nil {
			return
		}
		for _, o := range objs {
			if o.Kind == "" {
				t.Fatalf("Parse(%q): got an object without a kind: %+v", s, o)
			}
		}
	})
}
