package operatorrbac

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpu-operator/gpu-operator/internal/test/crdschema"
)

// Rules returns the rules of the operator's ClusterRole and of its Role in
// its namespace.
func Rules() (cluster, namespaced []rbacv1.PolicyRule, err error) {
	return RulesIn(crdschema.RepoRoot())
}

// RulesIn is Rules of the repository at root.
func RulesIn(root string) (cluster, namespaced []rbacv1.PolicyRule, err error) {
	data, err := os.ReadFile(filepath.Join(root, "config", "rbac", "role.yaml"))
	if err != nil {
		return nil, nil, err
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var role rbacv1.ClusterRole // a Role decodes the same way
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			return nil, nil, fmt.Errorf("decoding config/rbac/role.yaml: %w", err)
		}
		switch role.Kind {
		case "ClusterRole":
			cluster = role.Rules
		case "Role":
			namespaced = role.Rules
		}
	}
	if cluster == nil {
		return nil, nil, fmt.Errorf("config/rbac/role.yaml holds no ClusterRole")
	}
	return cluster, namespaced, nil
}
