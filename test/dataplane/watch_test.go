package dataplane

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestFirstDrop(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int, got Got) Sample {
		return Sample{Start: t0.Add(time.Duration(ms) * time.Millisecond), Got: got}
	}
	edit := t0.Add(150 * time.Millisecond)

	drop, comeback, ok := FirstDrop([]Sample{at(0, GotAllowed), at(100, GotAllowed), at(200, GotAllowed), at(300, GotDenied), at(400, GotDenied)}, edit)
	assert.True(t, ok)
	assert.Nil(t, comeback)
	assert.Equal(t, t0.Add(300*time.Millisecond), drop, "the first denied attempt after the edit")

	_, _, ok = FirstDrop([]Sample{at(0, GotDenied), at(200, GotAllowed), at(300, GotAllowed)}, edit)
	assert.False(t, ok, "a drop before the edit does not count, and the flow never stopped after it")

	_, comeback, ok = FirstDrop([]Sample{at(200, GotDenied), at(300, GotAllowed), at(400, GotDenied)}, edit)
	assert.False(t, ok, "a flow that comes back after dropping is no revocation")
	if assert.NotNil(t, comeback) {
		assert.Equal(t, t0.Add(300*time.Millisecond), comeback.Start)
	}

	_, comeback, ok = FirstDrop([]Sample{at(200, GotDenied), at(300, GotRefused)}, edit)
	assert.False(t, ok, "a refusal after the drop means packets pass again")
	assert.NotNil(t, comeback)
}

func TestContainerPorts(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "sidecar", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Ports: []corev1.ContainerPort{{ContainerPort: 8080}}},
			{Name: "init", Ports: []corev1.ContainerPort{{ContainerPort: 9999}}},
		},
		Containers: []corev1.Container{
			{Name: "main", Ports: []corev1.ContainerPort{{ContainerPort: 3000}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {ContainerPort: 7, Protocol: corev1.ProtocolSCTP}}},
		},
	}}
	assert.Equal(t, []Port{{3000, corev1.ProtocolTCP}, {53, corev1.ProtocolUDP}, {8080, corev1.ProtocolTCP}}, containerPorts(pod),
		"the containers' and the sidecars' TCP and UDP ports; not a plain init container's")
}

func TestHostLinkName(t *testing.T) {
	name := hostLinkName("0b7c2f3e-5d1a-4c1e-9a51-2f0e8e7d9c11")
	assert.LessOrEqual(t, len(name), 15, "an interface name holds at most 15 bytes")
	assert.NotEqual(t, name, hostLinkName("0b7c2f3e-5d1a-4c1e-9a51-2f0e8e7d9c12"))
}
