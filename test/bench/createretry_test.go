//go:build integration

package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A create the API server answered 504 to is tried again, and one that
// then exists is done; an object that existed before is not the fixture's.
func TestCreateThroughTimeouts(t *testing.T) {
	gr := schema.GroupResource{Resource: "services"}
	timeout := apierrors.NewTimeoutError("etcd slow", 0)
	exists := apierrors.NewAlreadyExists(gr, "s")
	answers := func(errs ...error) func() error {
		return func() error {
			err := errs[0]
			errs = errs[1:]
			return err
		}
	}
	assert.NoError(t, createThroughTimeouts(answers(nil)))
	assert.NoError(t, createThroughTimeouts(answers(timeout, nil)))
	assert.NoError(t, createThroughTimeouts(answers(timeout, exists)), "the timed-out create landed")
	assert.True(t, apierrors.IsAlreadyExists(createThroughTimeouts(answers(exists))), "it existed before the fixture")
	assert.True(t, apierrors.IsTimeout(createThroughTimeouts(answers(timeout, timeout, timeout, timeout, timeout, nil))), "at most maxCreateAttempts")
	assert.True(t, apierrors.IsBadRequest(createThroughTimeouts(answers(apierrors.NewBadRequest("no")))))
}
