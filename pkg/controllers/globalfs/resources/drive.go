package resources

import (
	"fmt"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

// DriveHolder returns the GlobalFileSystem of all that holds g's drive
// when it is not g, or nil when g holds it (docs/globalfilesystem.md, "One
// writer per drive"): the drive is held by the oldest GlobalFileSystem of
// g's namespace naming it — the earlier creation timestamp, then the
// smaller name — among those not being deleted. Equal (or absent)
// timestamps, as in render's input, leave the name to decide. all may
// include g; the controller passes its cache, render its input.
func DriveHolder(g *clerumv1alpha1.GlobalFileSystem, all []*clerumv1alpha1.GlobalFileSystem, opts Options) *clerumv1alpha1.GlobalFileSystem {
	drive := DriveName(g, opts)
	var holder *clerumv1alpha1.GlobalFileSystem
	for _, o := range all {
		// One name is one object in a namespace (the cache holds one), and
		// render's objects have no UID to tell them apart.
		if o.Name == g.Name || o.Namespace != g.Namespace || o.DeletionTimestamp != nil || DriveName(o, opts) != drive {
			continue
		}
		if olderThan(o, g) && (holder == nil || olderThan(o, holder)) {
			holder = o
		}
	}
	return holder
}

// DriveHeld returns why g may not run a writer of its drive because an
// older GlobalFileSystem holds it (DriveHolder), or "" when none does.
func DriveHeld(g *clerumv1alpha1.GlobalFileSystem, all []*clerumv1alpha1.GlobalFileSystem, opts Options) string {
	holder := DriveHolder(g, all, opts)
	if holder == nil {
		return ""
	}
	return fmt.Sprintf("drive %s is held by GlobalFileSystem %s, which is older; no gfsc runs for %s while it names the drive",
		DriveName(g, opts), holder.Name, g.Name)
}

// olderThan orders GlobalFileSystems for holding a drive: the earlier
// creation timestamp, then the smaller name.
func olderThan(a, b *clerumv1alpha1.GlobalFileSystem) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}
