#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A loopback stand-in for the AWS endpoints `spur launch` reaches through the real `aws` CLI (SageMaker,
CloudWatch Logs, IAM), for tests. It binds port 0, prints "PORT <n>", answers from a scenario file and
appends every request, with what it found wrong with it, to a JSON-lines log.

Scenario (JSON): {"role_arn": "arn:aws:iam::123456789012:role/r",   IAM GetRole answer (absent: NoSuchEntity)
                  "create_error": {"status": 400, "type": "ResourceInUse", "message": "..."},    optional
                  "describe": [{"TrainingJobStatus": "InProgress", "SecondaryStatus": "Starting"}, ...],
                      one per DescribeTrainingJob call, the last one repeated
                  "after_stop": ["Stopping", "Stopped"],      statuses once StopTrainingJob was called
                  "logs": {"algo-1": ["line", ...], ...},   one stream per instance ("@KEY@" in a line becomes the
                                                             job's SPUR_STREAM_KEY, as its ranks would print it)
                  "log_batch": 2,                            events per GetLogEvents answer
                  "create_delay": 0,                         seconds CreateTrainingJob takes to answer
                  "describe_errors": 0,                      DescribeTrainingJob calls throttled first
                  "buckets": {"name": 200}}                  S3 HeadBucket answers (absent: 404, then created)
Usage: fake_aws.py SCENARIO.json REQUESTS.jsonl
"""
import http.server
import json
import re
import sys
import time
import urllib.parse

SCENARIO = json.load(open(sys.argv[1]))
LOG = sys.argv[2]
STATE = {"describe_calls": 0, "stopped_at": None, "job": None, "created": 0}
AUTH = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                  r"SignedHeaders=([^,]+), Signature=[0-9a-f]{64}$")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, content_type="application/x-amz-json-1.1"):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amzn-RequestId", "00000000-0000-0000-0000-000000000000")
        self.end_headers()
        self.wfile.write(data)

    def error(self, status, kind, message):
        self.reply(status, {"__type": kind, "Message": message})

    def check_signature(self, problems):
        match = AUTH.match(self.headers.get("Authorization", ""))
        if not match:
            problems.append("no SigV4 Authorization header: " + self.headers.get("Authorization", "(none)"))
            return {}
        for header in ("host", "x-amz-date"):
            if header not in match.group(5).split(";"):
                problems.append(f"{header} is not signed")
        return {"key_id": match.group(1), "region": match.group(3), "service": match.group(4)}

    def record(self, target, scope, payload, problems):
        with open(LOG, "a") as log:
            log.write(json.dumps({"target": target, "scope": scope, "body": payload, "problems": problems}) + "\n")

    # --- S3, path-style as the CLI addresses an IP endpoint ---------------------------------------------------
    def do_HEAD(self):
        problems = []
        scope = self.check_signature(problems)
        bucket = self.path.strip("/")
        self.record("S3.HeadBucket", scope, {"Bucket": bucket}, problems)
        self.send_response(SCENARIO.setdefault("buckets", {}).get(bucket, 404))
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_PUT(self):
        problems = []
        scope = self.check_signature(problems)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        bucket = self.path.strip("/")
        self.record("S3.CreateBucket", scope, {"Bucket": bucket, "Configuration": body}, problems)
        SCENARIO.setdefault("buckets", {})[bucket] = 200
        self.send_response(200)
        self.send_header("Location", "/" + bucket)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        target = self.headers.get("X-Amz-Target", "")
        problems = []
        scope = self.check_signature(problems)
        if target:
            payload = json.loads(body) if body else {}
            if self.headers.get("Content-Type") != "application/x-amz-json-1.1":
                problems.append("Content-Type " + str(self.headers.get("Content-Type")))
        else:
            payload = {k: v[0] for k, v in urllib.parse.parse_qs(body).items()}
            target = "IAM." + payload.get("Action", "?")
        self.record(target, scope, payload, problems)
        operation = target.split(".")[-1]
        handler = getattr(self, "op_" + operation, None)
        if handler is None:
            return self.error(400, "UnknownOperationException", target)
        handler(payload)

    # --- IAM (query protocol, XML) ----------------------------------------------------------------------------
    def op_GetRole(self, payload):
        name = payload.get("RoleName", "")
        arn = SCENARIO.get("role_arn")
        ns = 'xmlns="https://iam.amazonaws.com/doc/2010-05-08/"'
        if not arn:
            return self.reply(404, f"<ErrorResponse {ns}><Error><Type>Sender</Type><Code>NoSuchEntity</Code>"
                                   f"<Message>The role with name {name} cannot be found.</Message></Error>"
                                   "<RequestId>1</RequestId></ErrorResponse>", "text/xml")
        self.reply(200, f"<GetRoleResponse {ns}><GetRoleResult><Role><Path>/</Path><RoleName>{name}</RoleName>"
                        f"<RoleId>AROAEXAMPLE</RoleId><Arn>{arn}</Arn><CreateDate>2020-01-01T00:00:00Z</CreateDate>"
                        "<AssumeRolePolicyDocument>%7B%7D</AssumeRolePolicyDocument>"
                        "<MaxSessionDuration>3600</MaxSessionDuration></Role></GetRoleResult>"
                        "<ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></GetRoleResponse>",
                   "text/xml")

    # --- SageMaker --------------------------------------------------------------------------------------------
    def op_CreateTrainingJob(self, payload):
        failure = SCENARIO.get("create_error")
        if failure:
            return self.error(failure["status"], failure["type"], failure["message"])
        STATE["job"] = payload.get("TrainingJobName")
        STATE["key"] = payload.get("Environment", {}).get("SPUR_STREAM_KEY", "")
        STATE["created"] += 1
        time.sleep(SCENARIO.get("create_delay", 0))
        self.reply(200, {"TrainingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/" + STATE["job"]})

    def op_DescribeTrainingJob(self, payload):
        if payload.get("TrainingJobName") != STATE["job"]:
            return self.error(400, "ValidationException", "Requested resource not found.")
        if SCENARIO.get("describe_errors", 0) > 0:
            SCENARIO["describe_errors"] -= 1
            return self.error(400, "ThrottlingException", "Rate exceeded")
        if STATE["stopped_at"] is not None:
            after = SCENARIO.get("after_stop", ["Stopped"])
            status = {"TrainingJobStatus": after[min(STATE["describe_calls"] - STATE["stopped_at"], len(after) - 1)],
                      "SecondaryStatus": "Stopped"}
        else:
            script = SCENARIO["describe"]
            status = script[min(STATE["describe_calls"], len(script) - 1)]
        STATE["describe_calls"] += 1
        self.reply(200, dict(status, TrainingJobName=STATE["job"], CreationTime=1700000000.0,
                             TrainingJobArn="arn:aws:sagemaker:us-east-1:123456789012:training-job/" + STATE["job"]))

    def op_StopTrainingJob(self, payload):
        if payload.get("TrainingJobName") != STATE["job"]:
            return self.error(400, "ValidationException", "Requested resource not found.")
        STATE["stopped_at"] = STATE["describe_calls"]
        self.reply(200, {})

    # --- CloudWatch Logs --------------------------------------------------------------------------------------
    def streams(self):
        key = STATE.get("key", "")
        return {f"{STATE['job']}/{host}-1700000000": [line.replace("@KEY@", key) for line in lines]
                for host, lines in SCENARIO.get("logs", {}).items()}

    def op_DescribeLogStreams(self, payload):
        prefix = payload.get("logStreamNamePrefix", "")
        names = [name for name in sorted(self.streams()) if name.startswith(prefix)]
        self.reply(200, {"logStreams": [{"logStreamName": n, "creationTime": 1700000000000} for n in names]})

    def op_GetLogEvents(self, payload):
        lines = self.streams().get(payload.get("logStreamName"))
        if lines is None:
            return self.error(400, "ResourceNotFoundException", "The specified log stream does not exist.")
        start = int(payload.get("nextToken", "f/0").split("/")[1])
        batch = lines[start:start + SCENARIO.get("log_batch", 2)]
        end = start + len(batch)
        self.reply(200, {"events": [{"timestamp": 1700000000000 + i, "message": m, "ingestionTime": 1700000000000}
                                    for i, m in enumerate(batch, start)],
                         "nextForwardToken": f"f/{end}", "nextBackwardToken": f"b/{start}"})


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print("PORT", server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
