// The login page: POST /api/v1/auth/login, keep the token, go back where the user came from.
"use strict";

(() => {
  const form = document.getElementById("login-form");
  const error = document.getElementById("login-error");
  const target = det.sameOriginPath(new URLSearchParams(location.search).get("next"));

  if (!det.config.authEnabled) {
    document.getElementById("auth-off").classList.remove("hidden");
    form.classList.add("hidden");
    return;
  }
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.classList.add("hidden");
    try {
      await det.login(document.getElementById("username").value, document.getElementById("password").value);
      location.href = target;
    } catch (e) {
      error.textContent = e.status === 401 || e.status === 403 ? "Wrong user name or password." : `Could not log in: ${e.message}`;
      error.classList.remove("hidden");
    }
  });
})();
