-- Argo CD health check for perfexp.dev/PerfExperiment.
--
-- Install it under resource.customizations.health.perfexp.dev_PerfExperiment in
-- the argocd-cm ConfigMap (see README). It reads the kstatus conditions the
-- operator writes, so Argo CD shows an experiment the way Flux's kstatus does:
--   Ready=True                      -> Healthy   (finished; the summary is final),
--                                      Degraded when the verdict is Fail
--   Stalled=True                    -> Degraded  (Failed, Aborted, or waiting on
--                                                something only a person can fix)
--   otherwise                       -> Progressing (running, queued behind another
--                                      experiment (reason Queued), or not reconciled yet)
-- A status older than the spec (observedGeneration behind) is Progressing.
local hs = {status = "Progressing", message = "Waiting for the operator"}
if obj.status == nil then
  return hs
end
if obj.status.observedGeneration ~= nil and obj.metadata.generation ~= nil
    and obj.status.observedGeneration < obj.metadata.generation then
  hs.message = "Waiting for the operator to observe the latest spec"
  return hs
end
local ready, stalled, reconciling = nil, nil, nil
if obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    if c.type == "Ready" then ready = c end
    if c.type == "Stalled" then stalled = c end
    if c.type == "Reconciling" then reconciling = c end
  end
end
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message or "Succeeded"
  if obj.status.verdict ~= nil then
    hs.message = "Verdict " .. obj.status.verdict .. ": " .. hs.message
    -- A run that completed with a failing verdict measured an overhead past
    -- spec.successCriteria: the sync that brought it must not read Healthy.
    if obj.status.verdict == "Fail" then
      hs.status = "Degraded"
    end
  end
  return hs
end
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = (stalled.reason or "Stalled") .. ": " .. (stalled.message or "")
  return hs
end
if reconciling ~= nil and reconciling.message ~= nil then
  hs.message = reconciling.message
end
return hs
