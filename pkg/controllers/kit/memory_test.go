package kit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestDeletionsTellALeftoverFromALaterOwnersChild(t *testing.T) {
	d := NewDeletions("Host")
	child := func(uid string) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "Host", Name: "h1", UID: types.UID(uid), Controller: ptr.To(true)}}}
	}
	assert.False(t, d.Seen("h1"))
	assert.False(t, d.Leftover("h1", child("u1")), "nothing was seen deleted")
	d.Observe("h1", "u1")
	assert.True(t, d.Seen("h1"))
	assert.True(t, d.Leftover("h1", child("u1")), "a child of the deleted owner")
	assert.False(t, d.Leftover("h1", child("u2")), "a child of a later h1")
	assert.True(t, d.Leftover("h1", &metav1.ObjectMeta{}), "a child without a controller reference (another namespace)")
	assert.True(t, d.Leftover("h1", &metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "McpServer", Name: "h1", UID: "x", Controller: ptr.To(true)}}}),
		"a reference to another kind says nothing about the owner")
	d.Settle("h1")
	assert.False(t, d.Seen("h1"))
	assert.False(t, d.Leftover("h1", child("u1")))
}

func TestReasonsReturnThePreviousAndCount(t *testing.T) {
	r := NewReasons()
	assert.Equal(t, "", r.Set("a", "SecretsMissing"), "never set")
	assert.Equal(t, "SecretsMissing", r.Set("a", "SecretsMissing"), "unchanged: no second event")
	assert.Equal(t, "", r.Set("b", "SecretsMissing"))
	assert.Equal(t, 2, r.Count("SecretsMissing"))
	assert.Equal(t, "SecretsMissing", r.Set("a", "InvalidSpec"))
	assert.Equal(t, 1, r.Count("SecretsMissing"))
	assert.Equal(t, 1, r.Count("InvalidSpec"))
	assert.Equal(t, "InvalidSpec", r.Get("a"))
	assert.Equal(t, "InvalidSpec", r.Set("a", ""), "released: the release's event")
	assert.Equal(t, 0, r.Count("InvalidSpec"))
	assert.Equal(t, "", r.Get("a"))
	r.Forget("b")
	assert.Equal(t, 0, r.Count("SecretsMissing"))
	assert.Equal(t, "", r.Set("b", ""), "a forgotten object starts over")
}
