package imagepolicy

import (
	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

// JudgeServer judges what an McpServer runs of its own: spec.image of a
// local server. A remote server runs the platform's egress proxy, and
// platform images are never judged, so it has no verdict (judged false).
func (p *Policy) JudgeServer(s *v1alpha1.McpServer) (v Verdict, judged bool) {
	if s.Spec.Remote != nil {
		return Verdict{}, false
	}
	return p.Judge(s.Spec.Image), true
}

// Refuses reports whether the allowlist refuses what s runs: a local server
// whose image is invalid or under no allowed prefix.
func (p *Policy) Refuses(s *v1alpha1.McpServer) bool {
	v, judged := p.JudgeServer(s)
	return judged && !v.Allowed
}

// Enforced is the refusal enforce mode applies: p.Refuses when enforce is
// on, nil in audit mode (which refuses nothing). It is the one judgement
// the McpServer operator (the server is scaled to zero), the NetworkPolicy
// planner (its allows are not planned), render and hcc-api (no credential,
// deployed and ready false) share, so none of them can disagree about a
// server.
func Enforced(p *Policy, enforce bool) func(*v1alpha1.McpServer) bool {
	if !enforce {
		return nil
	}
	return p.Refuses
}
