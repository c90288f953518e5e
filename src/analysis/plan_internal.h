/* What the planner's own files share and its users need not see (plan_cost.c,
 * plan_collectives.c, plan_placement.c). */
#pragma once
#include "analysis/plan_cost.h"

/* The tier as `flows` flows crossing a node's links at once see it: beta x min(1, links_per_node
 * / flows) on inter tiers (a link per device when not given); the intra tier unchanged. */
plan_tier plan_tier_shared(const plan_cluster *c, plan_tier_kind kind, int flows);
