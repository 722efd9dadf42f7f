"""The typed contract of the REST API: a pydantic model for every route's request body and answer.

The models describe the JSON on the wire exactly as the routes send it (fields a route leaves out are optional
here, never renamed); the OpenAPI document (`docs/openapi.json`, served at `/openapi.json`) is generated from them.
`_base.Wire` forbids undeclared fields, so `contract.AnswerContract` (on in the test suite) turns an answer with a
field its model does not declare into a 500 that names it. One module per area of the API.
"""
