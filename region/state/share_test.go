package state

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

func replicaJSON(id string, rev int64, image string) string {
	return fmt.Sprintf(`{"id":%q,"tenant":"acme","resource":"web","resourceUID":"u-share","kind":"Compute","revision":%d,`+
		`"spec":{"compute":{"image":%q,"command":["sh","-c","sleep 1d"],"env":{"A":"1"},"restartPolicy":"always"}}}`, id, rev, image)
}

// TestReplicasOfARevisionShareOneSpec checks that the replicas of one
// revision of a resource hold one decoded compute spec, equal to what
// each decoded, and that a replica of another revision, or one that
// names the revision but differs, keeps its own.
func TestReplicasOfARevisionShareOneSpec(t *testing.T) {
	compacted := func(raw string) *api.Assignment {
		a, want := decode[api.Assignment](t, raw), decode[api.Assignment](t, raw)
		compactAssignment(a.ID, a)
		if !reflect.DeepEqual(a, want) {
			t.Fatalf("compacted assignment %+v; want it equal to %+v", a, want)
		}
		return a
	}
	a := compacted(replicaJSON("a1", 1, "busybox"))
	b := compacted(replicaJSON("a2", 1, "busybox"))
	if a.Spec.Compute != b.Spec.Compute {
		t.Errorf("two replicas of revision 1 hold two compute specs; want one shared")
	}
	next := compacted(replicaJSON("a3", 2, "nginx"))
	if next.Spec.Compute == a.Spec.Compute {
		t.Errorf("a replica of revision 2 holds revision 1's compute spec; want its own")
	}
	odd := compacted(replicaJSON("a4", 1, "alpine"))
	if odd.Spec.Compute == a.Spec.Compute || odd.Spec.Compute.Image != "alpine" {
		t.Errorf("a replica naming revision 1 with another spec got image %q, shared %v; want its own spec (alpine)",
			odd.Spec.Compute.Image, odd.Spec.Compute == a.Spec.Compute)
	}
	runtime.KeepAlive(b)
}

// TestSharedSpecsAreDropped checks that the table forgets a spec once
// no replica holds it: it does not grow with every revision ever seen.
func TestSharedSpecsAreDropped(t *testing.T) {
	var s shared[api.ComputeSpec]
	for rev := range int64(100) {
		s.share(revisionKey{"u-drop", rev}, &api.ComputeSpec{Image: "busybox"})
	}
	kept := s.share(revisionKey{"u-kept", 1}, &api.ComputeSpec{Image: "busybox"})
	deadline := time.Now().Add(30 * time.Second)
	for s.len() > 1 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.len(); n != 1 {
		t.Errorf("the table holds %d specs after their replicas went; want 1 (the one still held)", n)
	}
	if again := s.share(revisionKey{"u-kept", 1}, &api.ComputeSpec{Image: "busybox"}); again != kept {
		t.Errorf("a spec still held was dropped from the table")
	}
}

// TestPlacementSharesWithItsReplicas checks that a placement's compaction
// changes nothing of it, that it holds the compute spec and image its
// replicas of the same revision hold, and that placements naming one
// version of a flavor hold one copy of it.
func TestPlacementSharesWithItsReplicas(t *testing.T) {
	placement := func(name string) string {
		return fmt.Sprintf(`{"region":"r1","resource":{"name":%q,"tenant":"acme","uid":"u-pl-%s","kind":"Compute","revision":3,`+
			`"spec":{"flavor":"tiny","compute":{"image":"busybox","command":["sh"],"restartPolicy":"always"}}},`+
			`"flavor":{"name":"tiny","kind":"fake","spec":{"vcpus":1,"memoryMiB":64},"resourceVersion":7},"image":{"ref":"docker.io/library/busybox:latest"}}`, name, name)
	}
	compacted := func(raw string) *api.Placement {
		p, want := decode[api.Placement](t, raw), decode[api.Placement](t, raw)
		compactPlacement(p.Key(), p)
		if !reflect.DeepEqual(p, want) {
			t.Fatalf("compacted placement %+v; want it equal to %+v", p, want)
		}
		return p
	}
	web, db := compacted(placement("web")), compacted(placement("db"))
	if web.Flavor != db.Flavor {
		t.Errorf("two placements of flavor tiny, version 7, hold two copies of it; want one shared")
	}
	if web.Resource.Spec.Compute == db.Resource.Spec.Compute {
		t.Errorf("two resources' placements hold one compute spec; want each its own revision's")
	}
	replica := decode[api.Assignment](t, `{"id":"web-1","tenant":"acme","resource":"web","resourceUID":"u-pl-web","kind":"Compute","revision":3,`+
		`"spec":{"flavor":"tiny","compute":{"image":"busybox","command":["sh"],"restartPolicy":"always"}},"image":{"ref":"docker.io/library/busybox:latest"}}`)
	compactAssignment(replica.ID, replica)
	if replica.Spec.Compute != web.Resource.Spec.Compute || replica.Image != web.Image {
		t.Errorf("a replica of web's revision 3 shares compute spec %v, image %v with its placement; want both shared",
			replica.Spec.Compute == web.Resource.Spec.Compute, replica.Image == web.Image)
	}
	runtime.KeepAlive(db)
}
