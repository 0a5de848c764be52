;;; dap-mode-test.el --- `rewind dap' driven by Emacs dap-mode in batch mode  -*- lexical-binding: t -*-

;; emacs --batch -l dap-mode-test.el, with REWIND_BIN (the built `rewind'),
;; REWIND_HOME and RUN (a run killed by a signal) in the environment.
;; Opens the run: it must stop, with a frame in `worker' on the stack trace
;; (the stop's reason is not checked here; dap.test.mjs checks it); steps back (a second stop, at an earlier step), asks rewind/lanes, and
;; disconnects. Exits 0 when all of that happened, 1 otherwise.

(require 'package)
(package-initialize)
(require 'dap-mode)

(defvar rw-stops 0)
(defvar rw-steps nil "The step of each rewind/position, newest first.")

(defun rw-finish (code msg)
  (princ (format "dap-mode: %s\n" msg))
  (kill-emacs code))

(run-at-time 60 nil (lambda () (rw-finish 1 "timed out")))

(defun rw-fail (msg) (rw-finish 1 (format "error response: %s" msg)))

(defun rw-request (session command args then)
  (dap--send-message (dap--make-request command args)
                     (dap--resp-handler then #'rw-fail)
                     session))

(add-hook 'dap-stopped-hook
          (lambda (session)
            (setq rw-stops (1+ rw-stops))
            (let ((tid (dap--debug-session-thread-id session)))
              (pcase rw-stops
                (1 (rw-request
                    session "stackTrace" (list :threadId tid)
                    (lambda (resp)
                      (let ((names (mapcar (lambda (f) (gethash "name" f))
                                           (gethash "stackFrames" (gethash "body" resp)))))
                        (unless (member "worker" names)
                          (rw-finish 1 (format "no frame in worker: %S" names)))
                        (rw-request session "stepBack" (list :threadId tid) #'ignore)
                        (dap--resume-application session)))))
                (2 (rw-request
                    session "rewind/lanes" nil
                    (lambda (resp)
                      (let ((threads (gethash "threads" (gethash "body" resp))))
                        (unless (>= (length threads) 2)
                          (rw-finish 1 "lanes with fewer than two threads"))
                        (unless (and (= (length rw-steps) 2) (< (car rw-steps) (cadr rw-steps)))
                          (rw-finish 1 (format "stepBack did not go back: %S" rw-steps)))
                        (rw-request session "disconnect" nil
                                    (lambda (_)
                                      (rw-finish 0 (format "ok: stops at steps %S" (reverse rw-steps)))))))))))))

(add-hook 'dap-executed-hook #'ignore)

(defun rw-event (session event)
  "Keeps the step of every rewind/position EVENT."
  (ignore session)
  (when (equal (gethash "event" event) "rewind/position")
    (push (gethash "step" (gethash "body" event)) rw-steps)))

;; dap-mode hands events it does not know to `dap-custom-event-hook'-like
;; handlers only in newer versions; see every message instead.
(advice-add 'dap--on-event :before #'rw-event)

(dap-register-debug-provider "rewind" (lambda (conf) conf))
(dap-start-debugging
 (list :type "rewind" :request "launch" :name "rewind"
       :run (getenv "RUN")
       :dap-server-path (list (getenv "REWIND_BIN") "dap")))

(while t (accept-process-output nil 0.1))
