--[[
layoutopt's Slurm job_submit plugin (JobSubmitPlugins=lua): a job that opts in is placed by
the planner when it is submitted.

A job opts in with a comment that starts with "layoutopt:" followed by its plan entry, the
JSON of one job of POST /v1/plan less its name:

    sbatch --comment 'layoutopt:{"request": {"model": "llama3-8b",
        "training": {"global_batch": 256, "seq_len": 4096}}}' train.sh

For such a job this script runs the sidecar (slurm_submit.py, beside this file) under a hard
timeout, passing the job on the sidecar's standard input (never on a command line), and sets
what the plan chose: node list and count, GRES gpu:<type>:<per node>, the pool's feature and
partition, and an admin comment with the layout. On a timeout, an error or a plan that gives
the job nothing now, the job is accepted as submitted and the reason is logged: slurmctld
waits for this script, so it must never hold a submission longer than the timeout.

Set in slurmctld's environment (defaults in brackets):
  LAYOUTOPT_SLURM_CONFIG     the pools and the server's URL [layoutopt.json beside this file]
  LAYOUTOPT_SLURM_TIMEOUT_S  the longest a submission waits for a plan [2]
  LAYOUTOPT_SLURM_SIDECAR    [slurm_submit.py beside this file]
  LAYOUTOPT_SLURM_PYTHON     [python3]
docs/schedulers.md ("Slurm") says how to install it and what the config holds.
--]]

local OPT_IN = "layoutopt:"

local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "/etc/slurm"
local CONFIG = os.getenv("LAYOUTOPT_SLURM_CONFIG") or (here .. "/layoutopt.json")
local TIMEOUT_S = tonumber(os.getenv("LAYOUTOPT_SLURM_TIMEOUT_S") or "") or 2
local SIDECAR = os.getenv("LAYOUTOPT_SLURM_SIDECAR") or (here .. "/slurm_submit.py")
local PYTHON = os.getenv("LAYOUTOPT_SLURM_PYTHON") or "python3"

-- The fields the sidecar may set, and how each is written into the job.
local NUMBER_FIELDS = { min_nodes = true, max_nodes = true }
local TEXT_FIELDS = {
	req_nodes = true, tres_per_node = true, features = true, partition = true,
	admin_comment = true,
}

-- A word for /bin/sh: single-quoted, its own quotes closed and escaped.
local function shell_quote(text)
	return "'" .. string.gsub(text, "'", "'\\''") .. "'"
end

local function json_string(text)
	if text == nil then
		return "null"
	end
	local escaped = string.gsub(tostring(text), '[%c"\\]', function(c)
		return string.format("\\u%04x", string.byte(c))
	end)
	return '"' .. escaped .. '"'
end

-- What the sidecar needs of the job and of the jobs slurmctld knows (slurm.jobs).
local function job_json(job_desc)
	local jobs = {}
	for _, job in pairs(slurm.jobs or {}) do
		jobs[#jobs + 1] = string.format('{"state": %d, "nodes": %s, "admin_comment": %s}',
			tonumber(job.job_state) or 0, json_string(job.nodes), json_string(job.admin_comment))
	end
	return string.format('{"name": %s, "comment": %s, "partition": %s, "features": %s, "jobs": [%s]}',
		json_string(job_desc.name), json_string(job_desc.comment), json_string(job_desc.partition),
		json_string(job_desc.features), table.concat(jobs, ", "))
end

-- The sidecar's key=value lines as a table; nil and the reason when it gave none in time.
local function ask_sidecar(job_desc)
	local input_path = os.tmpname()
	local input = io.open(input_path, "w")
	if input == nil then
		return nil, "cannot write " .. input_path
	end
	input:write(job_json(job_desc))
	input:close()
	local command = string.format("timeout -k 1 %s %s %s %s %s < %s 2>&1",
		TIMEOUT_S, shell_quote(PYTHON), shell_quote(SIDECAR), shell_quote(CONFIG), TIMEOUT_S,
		shell_quote(input_path))
	local pipe = io.popen(command, "r")
	local output = pipe and pipe:read("*a") or ""
	if pipe then pipe:close() end
	os.remove(input_path)
	local fields = {}
	for line in string.gmatch(output, "[^\n]+") do
		local key, value = string.match(line, "^([%w_]+)=(.*)$")
		if key then fields[key] = value end
	end
	if fields.status == nil then
		return nil, string.format("no answer within %s s: %s", TIMEOUT_S, string.sub(output, 1, 300))
	end
	return fields
end

-- Every value checked before any is set, so a job is rewritten whole or not at all.
local function apply(job_desc, fields)
	if fields.req_nodes == nil or fields.tres_per_node == nil then
		return false, "the sidecar named no nodes or GPUs"
	end
	for key in pairs(NUMBER_FIELDS) do
		if tonumber(fields[key] or "") == nil then
			return false, string.format("%s is not a number: %s", key, tostring(fields[key]))
		end
	end
	for key, value in pairs(fields) do
		if NUMBER_FIELDS[key] then
			job_desc[key] = tonumber(value)
		elseif TEXT_FIELDS[key] then
			job_desc[key] = value
		end
	end
	-- the plan's GPUs per node replace a job-wide --gpus
	job_desc.tres_per_job = ""
	return true
end

local function place(job_desc, name)
	local fields, why = ask_sidecar(job_desc)
	if fields == nil then
		return false, why
	elseif fields.status ~= "planned" then
		return false, tostring(fields.reason)
	end
	local applied, invalid = apply(job_desc, fields)
	if not applied then
		return false, invalid
	end
	slurm.log_info("layoutopt: job %s: planned: %s", name, tostring(fields.admin_comment))
	slurm.log_user("%s", tostring(fields.admin_comment))
	return true
end

function slurm_job_submit(job_desc, part_list, submit_uid)
	local comment = job_desc.comment
	if comment == nil or string.sub(comment, 1, #OPT_IN) ~= OPT_IN then
		return slurm.SUCCESS
	end
	local name = tostring(job_desc.name)
	-- any error of ours is logged, never a refused submission
	local ok, placed, why = pcall(place, job_desc, name)
	if not ok then
		placed, why = false, tostring(placed)
	end
	if not placed then
		slurm.log_info("layoutopt: job %s: left as submitted: %s", name, why)
	end
	return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	return slurm.SUCCESS
end

return slurm.SUCCESS
