package dataplane

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Pods of a fixed address. kwok hands every pod an address of its own
// choosing and cannot be told one, so a flows file's pod with an ip runs
// on a second Node object, StaticNodeName, which kwok does not manage and
// the dataplane plays the kubelet of: the pod is bound to it at creation
// and its status (Running, Ready, the address) written at once. The
// node's address is NodeIP too, so kube-router, which finds the pods it
// enforces by their hostIP, enforces these alike, and the agent gives them
// a network as any other.
//
// kwok hands out 10.244.0.1, .2, ... in order (reusing freed ones): a
// fixed address high in 10.244.0.0/16 (or outside it) never meets one of
// its own in a test run. One held by a pod already is refused.

// StaticNodeName is the Node of the pods of a fixed address.
const StaticNodeName = "hcc-dataplane-static"

// staticTaint keeps the scheduler from placing any other pod there.
var staticTaint = corev1.Taint{Key: "hcc.dataplane/static", Effect: corev1.TaintEffectNoSchedule}

// createStaticNode registers StaticNodeName with the node's address.
func (e *Environment) createStaticNode(ctx context.Context) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("2000"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: StaticNodeName, Labels: map[string]string{"kubernetes.io/hostname": StaticNodeName}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{staticTaint}},
	}
	created, err := e.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating node %s: %w", StaticNodeName, err)
	}
	if err != nil {
		return nil
	}
	created.Status = corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: NodeIP.String()}},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "HCCDataplane", LastHeartbeatTime: metav1.Now()}},
	}
	_, err = e.Kube.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

// createStaticPod creates pod on StaticNodeName and writes its status as
// a kubelet would once it runs, with addr as its address.
func (e *Environment) createStaticPod(ctx context.Context, pod *corev1.Pod, addr netip.Addr) (*corev1.Pod, error) {
	pods, err := e.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		if p.Status.PodIP == addr.String() {
			return nil, fmt.Errorf("ip %s is pod %s/%s's", addr, p.Namespace, p.Name)
		}
	}
	pod.Spec.NodeName = StaticNodeName
	pod.Spec.Tolerations = []corev1.Toleration{{Key: staticTaint.Key, Operator: corev1.TolerationOpExists, Effect: staticTaint.Effect}}
	created, err := e.Kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	now := metav1.Now()
	created.Status = corev1.PodStatus{
		Phase:     corev1.PodRunning,
		HostIP:    NodeIP.String(),
		HostIPs:   []corev1.HostIP{{IP: NodeIP.String()}},
		PodIP:     addr.String(),
		PodIPs:    []corev1.PodIP{{IP: addr.String()}},
		StartTime: &now,
	}
	for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		created.Status.Conditions = append(created.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	for _, c := range created.Spec.Containers {
		created.Status.ContainerStatuses = append(created.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return e.Kube.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
}
