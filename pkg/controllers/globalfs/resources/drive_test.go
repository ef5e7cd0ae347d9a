package resources_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/globalfs/resources"
	"github.com/clerum/hcc/pkg/controllers/globalfs/resources/resourcestest"
)

func TestDriveHolderIsTheOldestNamingTheDriveThenTheSmallerName(t *testing.T) {
	at := func(minute int) metav1.Time { return metav1.NewTime(time.Date(2026, 1, 1, 0, minute, 0, 0, time.UTC)) }
	gfs := func(name, drive string, created metav1.Time) *clerumv1alpha1.GlobalFileSystem {
		return &clerumv1alpha1.GlobalFileSystem{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "gfs", CreationTimestamp: created},
			Spec:       clerumv1alpha1.GlobalFileSystemSpec{DriveName: drive},
		}
	}
	opts := resourcestest.Options
	opts.DriveName = "main"
	old, young := gfs("zeta", "main", at(1)), gfs("alpha", "", at(2)) // alpha names the default drive: main
	other := gfs("beta", "other", at(0))
	going := gfs("aaa", "main", at(0))
	going.DeletionTimestamp = &metav1.Time{Time: at(3).Time}
	elsewhere := gfs("aab", "main", at(0))
	elsewhere.Namespace = "elsewhere"
	all := []*clerumv1alpha1.GlobalFileSystem{young, old, other, going, elsewhere}

	assert.Nil(t, resources.DriveHolder(old, all, opts), "the oldest holds it; one being deleted or in another namespace does not")
	assert.Same(t, old, resources.DriveHolder(young, all, opts), "the earlier timestamp wins over the smaller name")
	assert.Nil(t, resources.DriveHolder(other, all, opts), "alone on its drive")
	assert.Equal(t, "drive main is held by GlobalFileSystem zeta, which is older; no gfsc runs for alpha while it names the drive",
		resources.DriveHeld(young, all, opts))
	assert.Empty(t, resources.DriveHeld(old, all, opts))

	// Without timestamps (render's input) the smaller name holds the drive.
	a, b := gfs("a", "main", metav1.Time{}), gfs("b", "main", metav1.Time{})
	assert.Nil(t, resources.DriveHolder(a, []*clerumv1alpha1.GlobalFileSystem{b, a}, opts))
	assert.Same(t, a, resources.DriveHolder(b, []*clerumv1alpha1.GlobalFileSystem{b, a}, opts))
}
