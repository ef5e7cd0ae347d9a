package v1alpha1

// Accessors that apply the schema defaults, so code reading objects that never
// passed through an API server (render input, fake clientsets) sees the same
// values as code reading objects the API server defaulted.

// IsEnabled reports spec.enabled, which defaults to true.
func (s *McpServerSpec) IsEnabled() bool {
	return s.Enabled == nil || *s.Enabled
}

// DesiredReplicas reports spec.replicas, which defaults to 1.
func (s *McpServerSpec) DesiredReplicas() int32 {
	if s.Replicas == nil {
		return DefaultMcpServerReplicas
	}
	return *s.Replicas
}

// EffectivePort reports transport.port, which defaults to 3000.
func (t *Transport) EffectivePort() int32 {
	if t.Port == nil {
		return DefaultTransportPort
	}
	return *t.Port
}

// EffectiveMode reports the binding mode, which defaults to exact-host.
func (b *EgressBinding) EffectiveMode() EgressMode {
	if b.Mode == "" {
		return DefaultEgressMode
	}
	return b.Mode
}

// EffectiveProtocol reports the binding protocol, which defaults to TCP.
func (b *EgressBinding) EffectiveProtocol() string {
	if b.Protocol == "" {
		return string(DefaultEgressProtocol)
	}
	return string(b.Protocol)
}

// DesktopEnabled reports whether the Host asks for the desktop sidecar.
func (s *HostSpec) DesktopEnabled() bool {
	return s.Desktop != nil && s.Desktop.Enabled
}
