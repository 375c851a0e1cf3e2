package serve

import (
	"net/http"
)

// chatCompletions serves POST /v1/chat/completions.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotImplemented, "invalid_request_error", "", "chat completions are not served yet", "")
}

// listModels serves GET /v1/models.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotImplemented, "invalid_request_error", "", "the model list is not served yet", "")
}
