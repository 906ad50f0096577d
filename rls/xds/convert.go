package xds

import (
	"errors"
	"fmt"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/sluice-rl/sluice/rls"
)

// TypeURL is the type of the resources the client asks for.
const TypeURL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

// ErrInvalidResource wraps the errors of Convert about a resource that is
// not a RateLimitConfig.
var ErrInvalidResource = errors.New("xds: invalid resource")

// The YAML model of one file, as the reference's YamlRoot (field names and
// omitted zero values as its yaml tags).
type (
	yamlRoot struct {
		Domain      string           `yaml:"domain"`
		Descriptors []yamlDescriptor `yaml:"descriptors,omitempty"`
	}
	yamlDescriptor struct {
		Key            string           `yaml:"key"`
		Value          string           `yaml:"value,omitempty"`
		RateLimit      *yamlRateLimit   `yaml:"rate_limit,omitempty"`
		Descriptors    []yamlDescriptor `yaml:"descriptors,omitempty"`
		ShadowMode     bool             `yaml:"shadow_mode,omitempty"`
		DetailedMetric bool             `yaml:"detailed_metric,omitempty"`
	}
	yamlRateLimit struct {
		RequestsPerUnit uint32        `yaml:"requests_per_unit"`
		Unit            string        `yaml:"unit"`
		Unlimited       bool          `yaml:"unlimited,omitempty"`
		Name            string        `yaml:"name,omitempty"`
		Replaces        []yamlReplace `yaml:"replaces,omitempty"`
	}
	yamlReplace struct {
		Name string `yaml:"name"`
	}
)

// Convert turns one response's resources into a configuration, each
// resource a file named "xds:<resource name>", loaded in the order given
// (as the reference loads them). An empty list is a configuration with no
// domains. A resource of another type, an undecodable one, or a
// configuration package rls rejects is an error; an *rls.Error then names
// the resource and the field (its line is that of the converted YAML, so
// it is left out).
func Convert(resources []*anypb.Any, opt rls.Options) (*rls.Config, error) {
	files := make([]rls.File, 0, len(resources))
	for i, res := range resources {
		if res.GetTypeUrl() != TypeURL {
			return nil, fmt.Errorf("%w: resources[%d]: type %q, want %q", ErrInvalidResource, i, res.GetTypeUrl(), TypeURL)
		}
		var pb rlsconf.RateLimitConfig
		if err := anypb.UnmarshalTo(res, &pb, proto.UnmarshalOptions{}); err != nil {
			return nil, fmt.Errorf("%w: resources[%d]: %w", ErrInvalidResource, i, err)
		}
		data, err := yaml.Marshal(ToYAML(&pb))
		if err != nil {
			return nil, fmt.Errorf("%w: resources[%d] (%s): %w", ErrInvalidResource, i, pb.GetName(), err)
		}
		files = append(files, rls.File{Name: "xds:" + pb.GetName(), Data: data})
	}
	c, err := rls.Parse(files, opt)
	if err != nil {
		var re *rls.Error
		if errors.As(err, &re) {
			re.Line = 0
		}
		return nil, err
	}
	return c, nil
}

// ToYAML is the reference's ConfigXdsProtoToYaml: the resource as the
// YAML file model.
func ToYAML(pb *rlsconf.RateLimitConfig) any {
	return yamlRoot{Domain: pb.GetDomain(), Descriptors: descriptorsToYAML(pb.GetDescriptors())}
}

func descriptorsToYAML(pb []*rlsconf.RateLimitDescriptor) []yamlDescriptor {
	if len(pb) == 0 {
		return nil
	}
	out := make([]yamlDescriptor, len(pb))
	for i, d := range pb {
		out[i] = yamlDescriptor{Key: d.GetKey(), Value: d.GetValue(), RateLimit: policyToYAML(d.GetRateLimit()),
			Descriptors: descriptorsToYAML(d.GetDescriptors()), ShadowMode: d.GetShadowMode(), DetailedMetric: d.GetDetailedMetric()}
	}
	return out
}

func policyToYAML(pb *rlsconf.RateLimitPolicy) *yamlRateLimit {
	if pb == nil {
		return nil
	}
	// As the reference, the unit is the enum's name: "UNKNOWN" (unset) is
	// no valid unit, which only an unlimited rule may have.
	out := &yamlRateLimit{RequestsPerUnit: pb.GetRequestsPerUnit(), Unit: pb.GetUnit().String(),
		Unlimited: pb.GetUnlimited(), Name: pb.GetName()}
	for _, r := range pb.GetReplaces() {
		out.Replaces = append(out.Replaces, yamlReplace{Name: r.GetName()})
	}
	return out
}
